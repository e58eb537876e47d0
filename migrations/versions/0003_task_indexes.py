"""indexes for the web console: every single-filter listing, newest first, from an index

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Each list filter gets a (column, id) index so "WHERE column = ? ORDER BY id DESC LIMIT n" reads
n index entries instead of walking the table (bench/web.py measures it at 1M rows). The plain
``tool`` index is replaced by (tool, id): Postgres cannot order by id from the former. Calls are
listed newest first by ``started_at``, and a call's tasks are found by ``session_id``.
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# (name, table, columns); db/models.py declares the same.
INDEXES = [
    ("ix_tasks_status_id", "tasks", ["status", "id"]),
    ("ix_tasks_department_id", "tasks", ["department", "id"]),
    ("ix_tasks_tool_id", "tasks", ["tool", "id"]),
    ("ix_tasks_pattern_id", "tasks", ["pattern", "id"]),
    ("ix_tasks_session_id", "tasks", ["session_id", "id"]),
    ("ix_tasks_created_at", "tasks", ["created_at"]),
    ("ix_calls_started_at", "calls", ["started_at"]),
]


def upgrade() -> None:
    op.drop_index("ix_tasks_tool", table_name="tasks")
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        op.drop_index(name, table_name=table)
    op.create_index("ix_tasks_tool", "tasks", ["tool"])
