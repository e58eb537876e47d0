"""runners: each background runner's executor id and heartbeat

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

A runner (a DBOS executor, core/runner.py) registers here under its executor id and bumps
``beats`` every few seconds. Another runner that sees a row's beats stand still for the
takeover bound resumes that runner's workflows. Liveness is judged by the count changing, on
the observer's own monotonic clock, so no two processes' wall clocks are ever compared.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runners",
        sa.Column("executor_id", sa.String(100), primary_key=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(100), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("beats", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runners")
