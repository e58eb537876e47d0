"""weather_lookups: one row per forecast the weather desk looked up.

Revision ID: weather_0001
Revises:
Create Date: 2024-06-01

The first revision of the ``weather`` branch: ``down_revision = None`` and
``branch_labels = ("weather",)``. frontdesk keeps this branch's version in its own table,
``alembic_version_weather``; ``frontdesk db upgrade`` runs it and ``db current`` shows it.
"""

import sqlalchemy as sa
from alembic import op

revision = "weather_0001"
down_revision = None
branch_labels = ("weather",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "weather_lookups",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("caller", sa.String(200), nullable=False),
        sa.Column("city", sa.String(100), nullable=False),
        sa.Column("units", sa.String(10), nullable=False),
        sa.Column("summary", sa.String(300), nullable=False),
        sa.Column("looked_up_at", sa.Float(), nullable=False),  # unix time: same on every dialect
    )
    op.create_index("ix_weather_lookups_city", "weather_lookups", ["city", "units", "looked_up_at"])


def downgrade() -> None:
    op.drop_index("ix_weather_lookups_city", table_name="weather_lookups")
    op.drop_table("weather_lookups")
