"""TaskStore's operator actions beyond cancel: retry a failed background job.

A retry puts the same row back to queued (``frontdesk.core.jobs.retry_job`` then forks its
DBOS workflow): the job keeps its id, and so its idempotency key (the runner hands the tool
``job-<id>``), so a side effect a tool already made under that key is not made twice. The next
run counts the next attempt. The result, error, progress and delivery mark are cleared, so the
caller is told the new outcome as a follow-up.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from frontdesk.db.errors import NotRetryable
from frontdesk.db.hotpath import Condition
from frontdesk.db.models import utcnow
from frontdesk.db.records import Task

_CLEARED = (
    "result",
    "error",
    "progress",
    "progress_note",
    "lease_owner",
    "lease_expires_at",
    "started_at",
    "finished_at",
    "delivered_at",
)


class Actions:
    if TYPE_CHECKING:

        async def get(self, task_id: int, *, caller: str | None = None) -> Task: ...

        async def _change(
            self,
            values: dict[str, Any],
            where: list[Condition],
            now: datetime,
            note: str | None,
        ) -> Task | None: ...

    async def retry(self, task_id: int, *, by: str) -> Task:
        """Queue a failed background job again (``TaskNotFound``, or ``NotRetryable``). The
        change is compare-and-set on "failed", so two operators retrying at once queue it once."""
        task = await self.get(task_id)
        if task.pattern != "background":
            raise NotRetryable(task, "not background")
        values: dict[str, Any] = dict.fromkeys(_CLEARED)
        values["status"] = "queued"
        note = f"retried by {by}: queued for attempt {task.attempts + 1}"
        where: list[Condition] = [
            ("id", "=", task_id),
            ("status", "=", "failed"),
            ("pattern", "=", "background"),
        ]
        done = await self._change(values, where, utcnow(), note)
        if done is None:
            raise NotRetryable(await self.get(task_id), "not failed")
        return done
