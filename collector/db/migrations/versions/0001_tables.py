"""The store's tables.

Also brings a spool made before migrations up to date: its tables are kept, the columns it
lacks (``spooled.tenant``; the listing's columns of ``coverage``) are added, and the indexes
made.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TOTALS = (
    "expects",
    "missed",
    "judge_cost",
    "judge_rows",
    "omission_judged",
    "omission_failed",
    "loads_loaded",
    "loads_failed",
    "loads_denied",
    "loads_unresolved",
)
LISTING: tuple[tuple[str, Any, str | None], ...] = (
    ("closed_at", sa.Double(), None),
    ("latest", sa.Integer(), "1"),
    ("tenant", sa.Text(), "''"),
    ("framework", sa.Text(), None),
    ("summary", sa.Text(), None),
    *((name, sa.Double(), "0") for name in TOTALS),
)


def _column(name: str, kind: Any, default: str | None) -> sa.Column[Any]:
    if default is None:
        return sa.Column(name, kind)
    return sa.Column(name, kind, nullable=False, server_default=sa.text(default))


def upgrade() -> None:
    before = set(sa.inspect(op.get_bind()).get_table_names())
    op.create_table(
        "spooled",
        sa.Column("id", Id, primary_key=True, autoincrement=False),
        sa.Column("received_at", sa.Double(), nullable=False),
        sa.Column("signal", sa.Text(), nullable=False),
        sa.Column("segment", Id, nullable=False),
        sa.Column("offset", Id, nullable=False),
        sa.Column("length", Id, nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False, server_default=""),
        if_not_exists=True,
    )
    op.create_table(
        "closed",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("first_request", Id, nullable=False),
        sa.Column("last_request", Id, nullable=False),
        sa.Column("traces", sa.Text(), nullable=False),
        sa.Column("closed_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("session", "revision"),
        if_not_exists=True,
    )
    op.create_table(
        "results",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("superseded", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", sa.Double(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "coverage",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("evaluated_at", sa.Double(), nullable=False),
        *(_column(name, kind, default) for name, kind, default in LISTING),
        sa.PrimaryKeyConstraint("session", "revision"),
        if_not_exists=True,
    )
    op.create_table(
        "verdicts",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("evaluation", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("skill", sa.Text()),
        sa.Column("passed", sa.Integer()),
        sa.Column("evaluated_at", sa.Double(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "outbox",
        sa.Column("seq", Id, primary_key=True, autoincrement=True),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("enqueued_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("channel", "key"),
        if_not_exists=True,
    )
    op.create_table(
        "outbox_rows",
        sa.Column("channel", sa.Text(), primary_key=True),
        sa.Column("count", Id, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "state",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("value", Id, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "judge_pending",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("evaluation", sa.Text(), nullable=False),
        sa.Column("enqueued_at", sa.Double(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("last_error", sa.Text(), nullable=False, server_default=""),
        if_not_exists=True,
    )
    op.create_table(
        "reopenable",
        sa.Column("session", sa.Text(), primary_key=True),
        sa.Column("revision", Id, nullable=False),
        sa.Column("first_request", Id, nullable=False),
        sa.Column("traces", sa.Text(), nullable=False),
        sa.Column("spans", Id, nullable=False),
        sa.Column("closed_at", sa.Double(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "held",
        sa.Column("request", Id, nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("request", "session"),
        sqlite_with_rowid=False,
        if_not_exists=True,
    )
    _upgrade_older_spool(before)
    for name, table, columns in (
        ("results_session", "results", ["session", "revision"]),
        ("results_created_at", "results", ["created_at"]),
        ("coverage_evaluated_at", "coverage", ["evaluated_at"]),
        ("coverage_listing", "coverage", ["latest", "closed_at", "session", "revision"]),
        ("coverage_closed_at", "coverage", ["closed_at"]),
        ("verdicts_revision", "verdicts", ["session", "revision"]),
        ("verdicts_evaluated_at", "verdicts", ["evaluated_at"]),
        ("held_session", "held", ["session"]),
    ):
        op.create_index(name, table, columns, if_not_exists=True)


def _upgrade_older_spool(before: set[str]) -> None:
    """Columns a spool from before migrations may lack (SQLite only: no other store is that old)."""
    if not before:
        return
    inspector = sa.inspect(op.get_bind())
    if "tenant" not in {c["name"] for c in inspector.get_columns("spooled")}:
        # A spool from before tenants: its requests are the default tenant's.
        op.add_column("spooled", sa.Column("tenant", sa.Text(), nullable=False, server_default=""))
    have = {c["name"] for c in inspector.get_columns("coverage")}
    missing = [(name, kind, default) for name, kind, default in LISTING if name not in have]
    for name, kind, default in missing:
        op.add_column("coverage", _column(name, kind, default))
    # The new columns are filled in from each stored record by the store's start
    # (``collector.state.startup``): that takes the listing's code, which a migration must not.


def downgrade() -> None:
    for table in (
        "held",
        "reopenable",
        "judge_pending",
        "state",
        "outbox_rows",
        "outbox",
        "verdicts",
        "coverage",
        "results",
        "closed",
        "spooled",
    ):
        op.drop_table(table)
