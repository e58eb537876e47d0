"""The store's value objects: a task row, and the event observers receive."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Any

from frontdesk.db.statuses import FINISHED


def as_utc(value: datetime | None) -> datetime | None:
    """A datetime from the database as aware UTC (SQLite returns it naive)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


@dataclass(frozen=True)
class Task:
    """A row of ``tasks``; field names are DESIGN.md's column names."""

    id: int
    caller: str
    session_id: str | None
    department: str | None
    tool: str
    plugin: str | None
    pattern: str
    status: str
    args: dict[str, Any] | None
    result: Any
    error: str | None
    progress: float | None
    progress_note: str | None
    idempotency_key: str | None
    attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    delivered_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> Task:
        m = row._mapping
        data = {f.name: m[f.name] for f in fields(cls)}
        for key in ("lease_expires_at", "created_at", "started_at", "finished_at", "delivered_at"):
            data[key] = as_utc(data[key])
        return cls(**data)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def to_json(self) -> dict[str, Any]:
        return _json_fields(self)


@dataclass(frozen=True)
class TaskEvent:
    """What ``on_task_event`` observers receive: one committed transition."""

    task_id: int
    caller: str
    session_id: str | None
    tool: str
    plugin: str | None
    department: str | None
    pattern: str
    status: str
    note: str | None
    progress: float | None
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return _json_fields(self)


def _event_for(task: Task, note: str | None, at: datetime) -> TaskEvent:
    return TaskEvent(
        task_id=task.id,
        caller=task.caller,
        session_id=task.session_id,
        tool=task.tool,
        plugin=task.plugin,
        department=task.department,
        pattern=task.pattern,
        status=task.status,
        note=note,
        progress=task.progress,
        at=at,
    )


def _json_fields(record: Any) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(record).items()}
