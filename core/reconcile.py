"""Rows and workflows agree: what a runner fixes when a background job's ``tasks`` row and its
DBOS workflows tell different stories (core/runner.py runs this every heartbeat).

- A queued or running row with no workflow that can still run: its enqueue never reached DBOS
  (the system database was away, the call process died between the two writes), or it is a
  row from before DBOS. It is enqueued (or, after a retry, its latest run is forked).
- A running row whose latest workflow ended without writing it: cancelled through DBOS (the
  row is cancelled), failed inside the runner or out of recovery attempts (the row is failed).

Each fix waits until two sweeps in a row saw the same story, so an enqueue in flight is not
raced; every write is compare-and-set on the row's status, so two runners fixing at once, or a
job finishing meanwhile, change nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from frontdesk.core.jobs import ACTIVE, JobClient
from frontdesk.core.recording import RESTART
from frontdesk.db.models import utcnow

if TYPE_CHECKING:
    from frontdesk.db.store import TaskStore

log = logging.getLogger("frontdesk.runner")

# Rows looked at per sweep and status: the oldest are fixed first.
BATCH = 500
ENDED = {
    "ERROR": "the job stopped with an error in the runner",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": f"{RESTART} (too many attempts)",
    "SUCCESS": "the job ended but its result could not be recorded",
}


class Reconciler:
    def __init__(self, store: TaskStore, client: JobClient, local: Callable[[], set[int]]) -> None:
        self.store = store
        self.client = client
        self.local = local  # the ids this runner is running now
        self.suspects: set[int] = set()

    async def run(self) -> int:
        """One pass; how many rows it fixed."""
        rows = []
        for status in ("queued", "running"):
            found = await self.store.list(status=status, pattern="background", limit=BATCH)
            rows += sorted(found, key=lambda t: t.id)
        mine = self.local()
        rows = [t for t in rows if t.id not in mine]
        if not rows:
            self.suspects.clear()
            return 0
        latest = await self.client.latest([t.id for t in rows])
        suspects: set[int] = set()
        fixed = 0
        for task in rows:
            state = latest.get(task.id)
            if state in ACTIVE:
                continue
            suspects.add(task.id)
            if task.id not in self.suspects:
                continue  # seen once: wait a sweep (an enqueue may be on its way)
            if await self._fix(task.id, task.status, state):
                fixed += 1
        self.suspects = suspects
        return fixed

    async def _fix(self, task_id: int, status: str, state: str | None) -> bool:
        if status == "running" and state is None:
            # Running with no workflow at all: a row the runner before DBOS left. Queued
            # again (compare-and-set), then enqueued like any other.
            if await self.store.transition(
                task_id, "queued", expect=("running",), note="re-queued: no workflow runs it",
                lease_owner=None, lease_expires_at=None, started_at=None,
            ) is None:  # fmt: skip
                return False
            status = "queued"
        if status == "queued" or state is None:
            workflow = await self.client.retry(task_id)
            log.info("task %s had no runnable workflow; enqueued as %s", task_id, workflow)
            return True
        if state == "CANCELLED":
            done = await self.store.transition(
                task_id, "cancelled", expect=("running",), error="cancelled",
                note="cancelled in the job system", delivered_at=utcnow(),
            )  # fmt: skip
        else:
            why = ENDED.get(state, f"the job ended ({state})")
            done = await self.store.transition(
                task_id, "failed", expect=("running",), error=why, note=why
            )
        if done is not None:
            log.warning("task %s closed: its workflow ended %s", task_id, state)
        return done is not None
