"""What lets work and listings outlive their replica: revisions with queued judge work and the
evidence that finishes them (``judge_revisions``), and each replica's open sessions with its
beat (``open_sessions``, ``replicas``).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "judge_revisions",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("evidence", sa.LargeBinary(), nullable=False),
        sa.Column("closed_at", sa.Double(), nullable=False),
        sa.Column("lease_owner", sa.Text()),
        sa.Column("lease_expires", sa.Double()),
    )
    op.create_index("judge_revisions_lease", "judge_revisions", ["lease_owner", "lease_expires"])
    op.create_table(
        "open_sessions",
        sa.Column("replica", sa.Text(), nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("revision", Id, nullable=False),
        sa.Column("spans", Id, nullable=False),
        sa.Column("skill_loads", Id, nullable=False),
        sa.Column("seen_at", sa.Double(), nullable=False),
        sa.Column("closes_at", sa.Double(), nullable=False),
        sa.Column("closes_by", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("replica", "session"),
    )
    op.create_table(
        "replicas",
        sa.Column("replica", sa.Text(), primary_key=True),
        sa.Column("expires", sa.Double(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("replicas")
    op.drop_table("open_sessions")
    op.drop_index("judge_revisions_lease", "judge_revisions")
    op.drop_table("judge_revisions")
