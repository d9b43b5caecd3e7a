"""The store's tables, as SQLAlchemy Core metadata: what the queries are written against and
what the migrations (``collector/db/migrations``) must produce (a test compares the two).

Types hold on SQLite and PostgreSQL alike: request ids, revisions and counts are 64-bit
integers (SQLite's ``INTEGER PRIMARY KEY`` stays the rowid), times are unix seconds as
double precision, payloads are bytes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from evaluators.evidence import LOAD_STATUSES

# 64-bit on PostgreSQL; on SQLite every integer is, and a primary key must read INTEGER to be
# the rowid.
Id = BigInteger().with_variant(Integer(), "sqlite")
# What the overview sums, one column each of ``coverage`` (``collector.state.index`` writes them).
TOTALS = (
    "expects",
    "missed",
    "judge_cost",
    "judge_rows",
    "omission_judged",
    "omission_failed",
    *(f"loads_{status}" for status in LOAD_STATUSES),
)

metadata = MetaData()

spooled = Table(
    "spooled",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=False),
    Column("received_at", Double, nullable=False),
    Column("signal", Text, nullable=False),
    Column("segment", Id, nullable=False),
    Column("offset", Id, nullable=False),
    Column("length", Id, nullable=False),
    Column("tenant", Text, nullable=False, server_default=""),
)

closed = Table(
    "closed",
    metadata,
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("reason", Text, nullable=False),
    Column("first_request", Id, nullable=False),
    Column("last_request", Id, nullable=False),
    Column("traces", Text, nullable=False),
    Column("closed_at", Double, nullable=False),
    PrimaryKeyConstraint("session", "revision"),
)

results = Table(
    "results",
    metadata,
    Column("key", Text, primary_key=True),
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("record", Text, nullable=False),
    Column("superseded", Integer, nullable=False, server_default=text("0")),
    Column("created_at", Double, nullable=False),
    Index("results_session", "session", "revision"),
    # Retention deletes by age at every checkpoint: without it, each scanned the whole table.
    Index("results_created_at", "created_at"),
)

coverage = Table(
    "coverage",
    metadata,
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("record", Text, nullable=False),
    Column("evaluated_at", Double, nullable=False),
    Column("closed_at", Double),
    Column("latest", Integer, nullable=False, server_default=text("1")),
    Column("tenant", Text, nullable=False, server_default=""),
    Column("framework", Text),
    Column("summary", Text),
    *(Column(name, Double, nullable=False, server_default=text("0")) for name in TOTALS),
    PrimaryKeyConstraint("session", "revision"),
    Index("coverage_evaluated_at", "evaluated_at"),
    # The listing: latest revisions, newest first, keyset-paged.
    Index("coverage_listing", "latest", "closed_at", "session", "revision"),
    Index("coverage_closed_at", "closed_at"),
)

verdicts = Table(
    "verdicts",
    metadata,
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("evaluation", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("skill", Text),
    Column("passed", Integer),
    Column("evaluated_at", Double, nullable=False),
    Index("verdicts_revision", "session", "revision"),
    Index("verdicts_evaluated_at", "evaluated_at"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("channel", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("enqueued_at", Double, nullable=False),
    Column("lease_owner", Text),
    Column("lease_expires", Double),
    UniqueConstraint("channel", "key"),
    Index("outbox_lease", "lease_owner", "lease_expires"),
)

# How many rows each channel's outbox holds, kept by the transactions that change them.
outbox_rows = Table(
    "outbox_rows",
    metadata,
    Column("channel", Text, primary_key=True),
    Column("count", Id, nullable=False),
)

state = Table(
    "state",
    metadata,
    Column("name", Text, primary_key=True),
    Column("value", Id, nullable=False),
)

judge_pending = Table(
    "judge_pending",
    metadata,
    Column("key", Text, primary_key=True),
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("evaluation", Text, nullable=False),
    Column("enqueued_at", Double, nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("last_error", Text, nullable=False, server_default=""),
    # Which replica holds the call, until when (``collector.db.lease``).
    Column("lease_owner", Text),
    Column("lease_expires", Double),
    Index("judge_pending_lease", "lease_owner", "lease_expires"),
)

# Revisions later spans may reopen whole, and the requests each keeps from deletion.
reopenable = Table(
    "reopenable",
    metadata,
    Column("session", Text, primary_key=True),
    Column("revision", Id, nullable=False),
    Column("first_request", Id, nullable=False),
    Column("traces", Text, nullable=False),
    Column("spans", Id, nullable=False),
    Column("closed_at", Double, nullable=False),
)

held = Table(
    "held",
    metadata,
    Column("request", Id, nullable=False),
    Column("session", Text, nullable=False),
    PrimaryKeyConstraint("request", "session"),
    Index("held_session", "session"),
    sqlite_with_rowid=False,
)

# Revisions whose judge work is queued, with the evidence that finishes them anywhere: the
# closed session (``collector.evaluate.handover``), leased like the work rows
# (``collector.db.lease``) to the replica that evaluates it.  Gone once its coverage commits.
judge_revisions = Table(
    "judge_revisions",
    metadata,
    Column("key", Text, primary_key=True),
    Column("session", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("evidence", LargeBinary, nullable=False),
    Column("closed_at", Double, nullable=False),
    Column("lease_owner", Text),
    Column("lease_expires", Double),
    Index("judge_revisions_lease", "lease_owner", "lease_expires"),
)

# Each replica's open sessions as of its last beat (``collector.status.cluster``), read by
# every replica's ``?state=open`` while the replica's beat (``replicas``) has not lapsed.
open_sessions = Table(
    "open_sessions",
    metadata,
    Column("replica", Text, nullable=False),
    Column("session", Text, nullable=False),
    Column("tenant", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("revision", Id, nullable=False),
    Column("spans", Id, nullable=False),
    Column("skill_loads", Id, nullable=False),
    Column("seen_at", Double, nullable=False),
    Column("closes_at", Double, nullable=False),
    Column("closes_by", Text, nullable=False),
    PrimaryKeyConstraint("replica", "session"),
)

replicas = Table(
    "replicas",
    metadata,
    Column("replica", Text, primary_key=True),
    Column("expires", Double, nullable=False),
)
