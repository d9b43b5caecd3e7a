"""Judge work that outlives its replica: the leases on ``judge_revisions`` (see
``collector.evaluate.pending``), renewed while this replica lives, and taken over when
another's lapse.

Every ``store.lease_seconds / 3`` a ``Takeover`` beat, in one transaction of the shared store:

1. renews every lease this replica holds (``collector.db.lease.renew_all``): the revisions it
   evaluates, queued or replayed after a restart, stay its own while it lives;
2. while the runner has room (``judge.max_queue``), claims revisions whose lease lapsed (their
   replica died, or let them go at its restart), ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
   replicas claiming at once take different ones; with each, the verdicts committed under its
   keys and the waiting work's first-queued times and failed calls.

Each claimed revision is planned again from its evidence (``Runner.resume``): the verdicts
committed are reused (the idempotency key is the verdict's, not the replica's), the judge is
asked only for the rest, and its account goes through this replica's recorder, metrics and
exporters, once.  A revision whose evidence cannot be read is dropped with an error naming it
(nothing else can finish it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson
import sqlalchemy as sa

from collector.db import lease
from collector.db.schema import judge_revisions
from collector.db.shared import Db
from collector.evaluate.evidence_codec import decode
from collector.telemetry import RateLimitedLog
from evaluators.evidence import Session

log = logging.getLogger("skillgauge")
T = TypeVar("T")
CLAIM_AT_ONCE = 16  # revisions a beat takes over at most


class LeasingStore(Protocol):
    """The part of ``collector.state.types.Spool`` the takeover uses."""

    replica: str
    lease_seconds: float

    async def transact(self, work: Callable[[Db], T]) -> T: ...


class Resuming(Protocol):
    """The part of ``collector.evaluate.runner.Runner`` that evaluates a revision taken over."""

    recovered: dict[str, dict[str, Any]]
    pending_since: dict[str, tuple[float, int]]

    def spare(self) -> int:
        """How many more judge evaluations may be queued now (0 without a judge)."""
        ...

    def resume(self, session: Session, closed_at: float) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class Claimed:
    """A revision taken over: its row, its committed verdicts, its waiting work's times."""

    key: str
    evidence: bytes
    closed_at: float
    verdicts: dict[str, dict[str, Any]]
    pending: dict[str, tuple[float, int]]


class Takeover:
    def __init__(self, store: LeasingStore, runner: Resuming, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._runner = runner
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._warn = RateLimitedLog(log, logging.WARNING, 60.0)  # while the shared store is away
        self.taken = 0  # revisions taken over so far

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="skillgauge-takeover")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        every = self._store.lease_seconds / 3
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the shared store is away: the next beat tries again
                self._warn("judge leases: renewing or taking over failed (%s); trying again", err)
            await asyncio.sleep(every)

    async def beat(self) -> int:
        """Renew this replica's leases and take over what lapsed; returns how many revisions
        were taken over."""
        owner, seconds, room = self._store.replica, self._store.lease_seconds, self._runner.spare()
        now = self._clock()

        def work(db: Db) -> list[Claimed]:
            lease.renew_all(db, judge_revisions, owner, now=now, lease=seconds)
            if room <= 0:
                return []
            others = sa.or_(judge_revisions.c.lease_owner.is_(None), judge_revisions.c.lease_owner != owner)
            rows = lease.claim(
                db,
                judge_revisions,
                owner,
                now=now,
                lease=seconds,
                limit=min(room, CLAIM_AT_ONCE),
                order_by="closed_at",
                where=others,
            )
            return [_claimed(db, row) for row in rows]

        claimed = await self._store.transact(work)
        for revision in claimed:
            await self._resume(revision)
        return len(claimed)

    async def _resume(self, revision: Claimed) -> None:
        try:
            session = decode(revision.evidence)
        except ValueError as err:
            log.error("judge work of revision %s cannot be taken over (%s): it is dropped", revision.key, err)
            await self._store.transact(
                lambda db: db.execute("DELETE FROM judge_revisions WHERE key = :key", {"key": revision.key})
            )
            return
        log.info(
            "judge: taking over session %r revision %d from a replica whose lease lapsed "
            "(%d verdicts committed, %d evaluations waited)",
            session.session_id,
            session.revision,
            len(revision.verdicts),
            len(revision.pending),
        )
        self._runner.recovered.update(revision.verdicts)
        self._runner.pending_since.update(revision.pending)
        self.taken += 1
        await self._runner.resume(session, revision.closed_at)


def _claimed(db: Db, row: lease.Row) -> Claimed:
    params = {"session": row["session"], "revision": row["revision"]}
    verdicts = {
        str(key): _record(record)
        for key, record in db.rows(
            "SELECT key, record FROM results WHERE session = :session AND revision = :revision AND superseded = 0",
            params,
        )
    }
    pending = {
        str(key): (float(at), int(attempts))
        for key, at, attempts in db.rows(
            "SELECT key, enqueued_at, attempts FROM judge_pending WHERE session = :session AND revision = :revision",
            params,
        )
    }
    return Claimed(str(row["key"]), bytes(row["evidence"]), float(row["closed_at"]), verdicts, pending)


def _record(text: str) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(text)
    return value
