"""tasks, task_events and calls

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = ("frontdesk",)
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("caller", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(100)),
        sa.Column("department", sa.String(64)),
        sa.Column("tool", sa.String(64), nullable=False),
        sa.Column("plugin", sa.String(100)),
        sa.Column("pattern", sa.String(20), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("args", sa.JSON()),
        sa.Column("result", sa.JSON()),
        sa.Column("error", sa.Text()),
        sa.Column("progress", sa.Float()),
        sa.Column("progress_note", sa.String(500)),
        sa.Column("idempotency_key", sa.String(128), unique=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(100)),
        sa.Column("lease_expires_at", TS),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
        sa.Column("delivered_at", TS),
    )
    op.create_index("ix_tasks_caller_id", "tasks", ["caller", "id"])
    op.create_index("ix_tasks_status_lease", "tasks", ["status", "lease_expires_at"])
    op.create_index("ix_tasks_tool", "tasks", ["tool"])
    op.create_table(
        "task_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "task_id", sa.Integer(), sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("at", TS, nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("note", sa.Text()),
    )
    op.create_index("ix_task_events_task_id", "task_events", ["task_id"])
    op.create_table(
        "calls",
        sa.Column("session_id", sa.String(100), primary_key=True),
        sa.Column("caller", sa.String(200), nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("ended_at", TS),
        sa.Column("handoffs", sa.JSON(), nullable=False),
    )
    op.create_index("ix_calls_caller", "calls", ["caller"])


def downgrade() -> None:
    op.drop_table("calls")
    op.drop_table("task_events")
    op.drop_table("tasks")
