"""the billing ledger moved to the billing plugin's own branch (a no-op kept for history)

Until the platform move (issue 12) this revision created core's accounts, invoices and payments
tables. They belong to the billing plugin now: its branch (plugins/billing/migrations, revision
billing_0001, version table alembic_version_billing) creates them, and adopts them where a
database already has them from this revision, so their rows are kept. The revision id stays
"0002" so databases stamped with it need no change.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
