"""billing's ledger: accounts, invoices and payments

The first revision of billing's own branch (version table ``alembic_version_billing``). Until
the platform move these tables were core's revision 0002; a database that ran it keeps them and
their rows, and this revision adopts them: each table (with its indexes) is created only where
it does not exist yet.

Revision ID: billing_0001
Revises:
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "billing_0001"
down_revision = None
branch_labels = ("billing",)
depends_on = None

TS = sa.DateTime(timezone=True)
# Exact money: never a float (see plugins/billing/ledger.py).
MONEY = sa.Numeric(12, 2, asdecimal=True)


def _missing(name: str) -> bool:
    return not sa.inspect(op.get_bind()).has_table(name)


def upgrade() -> None:
    if _missing("accounts"):
        op.create_table(
            "accounts",
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("caller", sa.String(200), nullable=False, unique=True),
            sa.Column("name", sa.String(200), nullable=False),
            sa.Column("currency", sa.String(3), nullable=False),
            sa.Column("balance", MONEY, nullable=False),
            sa.Column("created_at", TS, nullable=False),
        )
    if _missing("invoices"):
        op.create_table(
            "invoices",
            sa.Column("id", sa.String(32), primary_key=True),
            sa.Column("account_id", sa.Integer(), sa.ForeignKey("accounts.id"), nullable=False),
            sa.Column("payee", sa.String(200), nullable=False),
            sa.Column("description", sa.String(500), nullable=False),
            sa.Column("amount", MONEY, nullable=False),
            sa.Column("status", sa.String(12), nullable=False),
            sa.Column("due_date", sa.Date(), nullable=False),
            sa.Column("created_at", TS, nullable=False),
            sa.CheckConstraint("amount > 0", name="ck_invoices_amount_positive"),
        )
        op.create_index("ix_invoices_account_id", "invoices", ["account_id"])
    if _missing("payments"):
        op.create_table(
            "payments",
            sa.Column("id", sa.String(32), primary_key=True),
            sa.Column("account_id", sa.Integer(), sa.ForeignKey("accounts.id"), nullable=False),
            sa.Column("invoice_id", sa.String(32), sa.ForeignKey("invoices.id")),
            sa.Column("amount", MONEY, nullable=False),
            sa.Column("kind", sa.String(12), nullable=False),
            sa.Column("status", sa.String(12), nullable=False),
            sa.Column("idempotency_key", sa.String(128), nullable=False, unique=True),
            sa.Column("gateway_ref", sa.String(200)),
            sa.Column("refunded_payment_id", sa.String(32), sa.ForeignKey("payments.id")),
            sa.Column("created_at", TS, nullable=False),
            sa.Column("completed_at", TS),
            sa.CheckConstraint("amount > 0", name="ck_payments_amount_positive"),
        )
        op.create_index("ix_payments_account_id", "payments", ["account_id"])
        op.create_index("ix_payments_invoice_id", "payments", ["invoice_id"])
        op.create_index("ix_payments_refunded_payment_id", "payments", ["refunded_payment_id"])


def downgrade() -> None:
    op.drop_table("payments")
    op.drop_table("invoices")
    op.drop_table("accounts")
