"""What the store's owners hand each other: closed revisions, reopenable revisions, what a
restart recovers, and the ``Spool`` interface the stages use (``collector.state.facade.Store``
implements it, on a SQLite file or in memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

import orjson

from collector.db.location import Location
from collector.db.shared import Db
from collector.db.writer import Faults

T = TypeVar("T")
# An evaluated session revision: (session, revision, its results' records, its coverage line).
Recorded = tuple[str, int, list[str], str]
# Judge work waiting: (idempotency key, session, revision, evaluation, first queued at (epoch s)).
PendingJudge = tuple[str, str, int, str, float]


def encode_record(record: dict[str, Any]) -> str:
    """How records are stored: compact JSON, keys sorted.  orjson: a closed session has a
    dozen records, and ``json`` took 8 % of the serving process's time encoding them."""
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()


# Sessions whose latest revision a restart remembers (the assembler's bound on revisions).
LATEST_REVISIONS = 100_000


def revision_key(session: str, revision: int) -> str:
    """The key of a session's revision in ``judge_revisions`` (one column: what leases take)."""
    return f"{revision}:{session}"


QuarantineReason = Literal["unreadable", "undecodable"]
# Closed for these reasons, a session reopened by late spans carries its earlier evidence
# (it is kept for reopening whole); cut for size or age, the next revision starts afresh.
REOPEN_WHOLE = frozenset({"idle_timeout", "end_attribute"})


class Closed(NamedTuple):
    """A closed session revision: its spans are those of requests first..last on its traces.
    Immutable; a tuple, so built with no per-field ``object.__setattr__`` (one a closed
    session, on the loop)."""

    session: str
    revision: int
    reason: str
    first_request: int
    last_request: int
    traces: tuple[str, ...]  # hex trace ids


class Reopenable(NamedTuple):
    """An evaluated revision that later spans may reopen whole (as the next revision, with
    every earlier span): the spooled requests that hold its spans are kept while it is
    reopenable (``sessions.reopen_cache``), and read again, only they, to rebuild it.
    Immutable; a tuple, as ``Closed``."""

    session: str
    revision: int
    first_request: int
    requests: tuple[int, ...]
    traces: tuple[str, ...]  # hex trace ids
    spans: int


@dataclass
class Recovery:
    """What a restart needs: where to replay from, and what was already done."""

    replay_from: int = 1
    closed: dict[str, list[Closed]] = field(default_factory=dict)  # session -> revisions
    evaluated: set[tuple[str, int]] = field(default_factory=set)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # idempotency key -> record
    # Judge work that was waiting: idempotency key -> (first queued at (epoch s), failed calls).
    pending: dict[str, tuple[float, int]] = field(default_factory=dict)
    # Each session's latest evaluated revision (the most recently evaluated sessions first,
    # at most ``LATEST_REVISIONS``): the next one under its key is numbered after it.
    latest: dict[str, int] = field(default_factory=dict)
    reopenable: list[Reopenable] = field(default_factory=list)  # oldest first


class Spool(Protocol):
    durable: bool
    location: Location  # where its local database is (the request log's)
    shared: Location  # where the shared tables are: what the status queries read
    replica: str  # this replica's name in the shared store
    lease_seconds: float  # how long work it takes (an outbox entry it peeks) stays its own
    faults: Faults
    # The export outbox's bound (``export.otlp.queue_size``) and each channel's row count as
    # of the start, kept up to date by ``collector.export.outbox.SpoolOutbox``.
    outbox_capacity: int
    outbox_counts: dict[str, int]
    # Closed revisions not yet evaluated (session, revision) -> the first request they need:
    # what a restart must replay for them.
    unfinished: dict[tuple[str, int], int]

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        """Commit one request (from ``tenant``); return its id once it is durable."""
        ...

    def record_closed(self, closed: Closed) -> None:
        """Note a closed revision (queued; committed with the next group)."""
        ...

    def keep_reopenable(self, entry: Reopenable) -> None:
        """Keep ``entry``'s requests, replacing what its session had kept: its rows are
        written by the first checkpoint whose deletions would reach its requests (until then
        its closed row holds them)."""
        ...

    def forget_reopenable(self, session: str) -> None:
        """``session`` can no longer reopen whole: its kept requests may go (queued)."""
        ...

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        """Those spooled requests (the ones still stored), in id order, read off the loop."""
        ...

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        """Commit one judged result before anything else can depend on it."""
        ...

    async def save_coverage(
        self, revisions: list[Recorded], lines: list[dict[str, Any]] | None = None
    ) -> None:
        """Commit evaluated session revisions, each a coverage line with its results (each as
        ``encode_record`` made it), in one transaction, marking them evaluated; earlier
        revisions' verdicts become superseded.  ``lines``: each revision's coverage line with
        its ``results``, as dicts, when the caller has them (nothing is parsed again)."""
        ...

    def defer(self, work: Callable[[Db], Any]) -> None:
        """Queue a write nobody waits for, committed with the next group (what an owner's
        client, such as the judge queue, notes through)."""
        ...

    async def transact(self, work: Callable[[Db], T]) -> T:
        """Run ``work`` in a transaction of the store's; its result once committed (what an
        owner's client, such as the export outbox, writes and reads through)."""
        ...

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        """Requests before ``replay_from`` are no longer needed: remember it and delete them
        (but those a reopenable revision keeps), with the closed-revision records they alone
        needed; results, coverage lines and reopenable revisions older than
        ``keep_results_for`` seconds go too."""
        ...

    def recovery(self) -> Recovery: ...

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        """(request id, signal, payload, tenant) of each spooled request from ``from_id`` on."""
        ...

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        """Set a spooled request that cannot be replayed aside (logged, counted, copied)."""
        ...

    def size_bytes(self) -> int: ...

    async def shutdown(self, timeout: float = 10.0) -> None: ...


def with_results(coverage: str, results: list[str]) -> str:
    """A coverage line (a JSON object's text) with the results' texts added as "results"."""
    if not (coverage.startswith("{") and coverage.endswith("}")):
        raise ValueError("a coverage line is a JSON object")
    fields = coverage[1:-1].strip()
    return f'{{{fields}{"," if fields else ""}"results":[{",".join(results)}]}}'
