"""SQLAlchemy 2 typed models. Alembic migrations must match these (tests check for drift)."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED = ("succeeded", "failed", "cancelled")


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
        # The web console's listings, one (filter, id) index per filter (migration web_0003).
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


# -- the billing ledger (plugins/billing.py; migration 0002) -------------------------------------
# Money is Numeric(12, 2) read back as Decimal. SQLite has no decimal type, so arithmetic on
# amounts is done in Python on Decimals, never in SQL, to keep every cent exact.
MONEY = Numeric(12, 2, asdecimal=True)
INVOICE_STATUSES = ("open", "paid")
PAYMENT_KINDS = ("charge", "refund")
# pending: the key is reserved and the gateway may or may not have moved money (reconcile it);
# succeeded: money moved and the ledger reflects it; failed: the gateway declined or it was voided.
PAYMENT_STATUSES = ("pending", "succeeded", "failed")


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    caller: Mapped[str] = mapped_column(String(200), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    currency: Mapped[str] = mapped_column(String(3))
    # What the caller owes: the sum of their invoices' open amounts.
    balance: Mapped[Decimal] = mapped_column(MONEY)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Invoice(Base):
    __tablename__ = "invoices"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "INV-1001"
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"), index=True)
    # Who is paid; the agent reads it back before a payment is confirmed.
    payee: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(500))
    amount: Mapped[Decimal] = mapped_column(MONEY)
    status: Mapped[str] = mapped_column(String(12))
    due_date: Mapped[date] = mapped_column(Date)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (CheckConstraint("amount > 0", name="ck_invoices_amount_positive"),)


class Payment(Base):
    __tablename__ = "payments"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "PAY-…" or "RFD-…"
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"), index=True)
    invoice_id: Mapped[str | None] = mapped_column(ForeignKey("invoices.id"), index=True)
    amount: Mapped[Decimal] = mapped_column(MONEY)
    kind: Mapped[str] = mapped_column(String(12))
    status: Mapped[str] = mapped_column(String(12))
    # Written before the gateway is called, so a retry after a crash finds it (exactly once).
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    gateway_ref: Mapped[str | None] = mapped_column(String(200))
    refunded_payment_id: Mapped[str | None] = mapped_column(ForeignKey("payments.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (CheckConstraint("amount > 0", name="ck_payments_amount_positive"),)
