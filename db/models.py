"""SQLAlchemy 2 typed models. Alembic migrations must match these (tests check for drift)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from frontdesk.db.statuses import FINISHED, STATUSES

__all__ = ["FINISHED", "STATUSES"]  # and the models below


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class Task(Base):
    __tablename__ = "tasks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    caller: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str | None] = mapped_column(String(100))
    department: Mapped[str | None] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(64))
    plugin: Mapped[str | None] = mapped_column(String(100))
    pattern: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(12))
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    result: Mapped[Any | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    progress: Mapped[float | None] = mapped_column(Float)
    progress_note: Mapped[str | None] = mapped_column(String(500))
    idempotency_key: Mapped[str | None] = mapped_column(String(128), unique=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        # A caller's history, newest first; also serves the follow-up watch.
        Index("ix_tasks_caller_id", "caller", "id"),
        # The runner's claim and lease-reclaim scans.
        Index("ix_tasks_status_lease", "status", "lease_expires_at"),
        # The web console's listings, one (filter, id) index per filter (migration 0003).
        Index("ix_tasks_status_id", "status", "id"),
        Index("ix_tasks_department_id", "department", "id"),
        Index("ix_tasks_tool_id", "tool", "id"),
        Index("ix_tasks_pattern_id", "pattern", "id"),
        Index("ix_tasks_session_id", "session_id", "id"),
        Index("ix_tasks_created_at", "created_at"),
    )


class TaskEvent(Base):
    __tablename__ = "task_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(12))
    note: Mapped[str | None] = mapped_column(Text)


class Call(Base):
    __tablename__ = "calls"

    session_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    caller: Mapped[str] = mapped_column(String(200), index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # [{"from": "triage", "to": "billing", "at": "2026-...Z"}, ...]
    handoffs: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)

    __table_args__ = (Index("ix_calls_started_at", "started_at"),)


class Runner(Base):
    """A background runner (a DBOS executor) and its heartbeat (core/takeover.py)."""

    __tablename__ = "runners"

    executor_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(12))  # running, stopped, gone (taken over)
    beats: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
