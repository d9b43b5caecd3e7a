"""Leases on work rows: which replica holds a judge call or an export, and until when.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TABLES = ("judge_pending", "outbox")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("lease_owner", sa.Text()))
        op.add_column(table, sa.Column("lease_expires", sa.Double()))
        op.create_index(f"{table}_lease", table, ["lease_owner", "lease_expires"])


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"{table}_lease", table)
        op.drop_column(table, "lease_expires")
        op.drop_column(table, "lease_owner")
