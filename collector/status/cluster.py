"""Every replica's open sessions, for every replica's ``?state=open`` (``storage.shared`` on
PostgreSQL: replicas sharing one store).

Open sessions live in their replica's memory.  Each replica publishes its own to the shared
store's ``open_sessions`` every ``storage.lease / 3`` seconds, off the ingest path (one
transaction a beat, writing only the sessions that opened, changed or closed since the last
one), with its beat in ``replicas`` (valid for ``storage.lease``); the same transaction reads
the other replicas' rows whose beat has not lapsed.  So a listing shows other replicas' open
sessions as of their last beat, and a dead replica's stop counting once its beat lapses
(their rows go after ``FORGET_AFTER`` leases, or at its next start).  Each row names the
replica that holds it (``replica``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from collector.db.shared import Db
from collector.telemetry import RateLimitedLog
from evaluators.evidence import session_key

log = logging.getLogger("skillgauge")
T = TypeVar("T")
FORGET_AFTER = 10  # leases after which a silent replica's rows are deleted
# What a published row holds (besides its replica and key), in the listing's words.
_FIELDS = ("tenant", "session_id", "revision", "spans", "skill_loads", "seen_at", "closes_at", "closes_by")
_Published = tuple[str, str, int, int, int, str]  # what, when it changes, is written again


class SharedStore(Protocol):
    replica: str
    lease_seconds: float

    async def transact(self, work: Callable[[Db], T]) -> T: ...


class OpenAcross:
    """This replica's open sessions published, the others' read (``rows``)."""

    def __init__(self, store: SharedStore, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self._published: dict[str, _Published] | None = None  # None: mine not yet cleared
        self._others: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._warn = RateLimitedLog(log, logging.WARNING, 60.0)  # while the shared store is away

    def start(self, local: Callable[[], list[dict[str, Any]]]) -> None:
        """Publish ``local()`` (this replica's open sessions, as ``SessionsStage.open_sessions``
        lists them) every beat."""
        self._task = asyncio.create_task(self._run(local), name="skillgauge-open-sessions")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self, local: Callable[[], list[dict[str, Any]]]) -> None:
        while True:
            try:
                await self.beat(local())
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the shared store is away: the next beat tries again
                self._warn("open sessions: publishing to the shared store failed (%s); trying again", err)
                self._published = None  # written whole at the next beat
            await asyncio.sleep(self._store.lease_seconds / 3)

    async def beat(self, local: list[dict[str, Any]]) -> None:
        """Publish ``local`` and read the other replicas' open sessions."""
        now, me, lease = self._clock(), self._store.replica, self._store.lease_seconds
        current = {
            _key(row): (
                row["tenant"],
                row["session_id"],
                row["revision"],
                row["spans"],
                row["skill_loads"],
                row["closes_by"],
            )
            for row in local
        }
        by_key = {_key(row): row for row in local}
        known = self._published
        changed = [k for k, v in current.items() if known is None or known.get(k) != v]
        gone = [] if known is None else [k for k in known if k not in current]
        rows = [
            (
                me,
                k,
                *current[k][:5],
                now - by_key[k]["idle_seconds"],
                now + by_key[k]["closes_in_seconds"],
                current[k][5],
            )
            for k in changed
        ]

        def work(db: Db) -> list[tuple[Any, ...]]:
            db.execute(
                "INSERT INTO replicas (replica, expires) VALUES (:me, :until) "
                "ON CONFLICT (replica) DO UPDATE SET expires = excluded.expires",
                {"me": me, "until": now + lease},
            )
            if known is None:
                db.execute("DELETE FROM open_sessions WHERE replica = :me", {"me": me})
            for start in range(0, len(gone), 256):
                names, params = db.in_("k", gone[start : start + 256])
                db.execute(
                    f"DELETE FROM open_sessions WHERE replica = :me AND session IN {names}",
                    {**params, "me": me},
                )
            db.insert(
                "open_sessions",
                ("replica", "session", *_FIELDS),
                rows,
                "ON CONFLICT (replica, session) DO UPDATE SET "
                + ", ".join(f"{name} = excluded.{name}" for name in _FIELDS),
            )
            forget = {"before": now - FORGET_AFTER * lease}
            db.execute(
                "DELETE FROM open_sessions WHERE replica IN (SELECT replica FROM replicas WHERE expires < :before)",
                forget,
            )
            db.execute("DELETE FROM replicas WHERE expires < :before", forget)
            return db.rows(
                "SELECT o.replica, " + ", ".join(f"o.{name}" for name in _FIELDS) + " FROM open_sessions o "
                "JOIN replicas r ON r.replica = o.replica WHERE r.expires >= :now AND o.replica <> :me",
                {"now": now, "me": me},
            )

        others = await self._store.transact(work)
        self._published = current
        self._others = [dict(zip(("replica", *_FIELDS), row, strict=True)) for row in others]

    def rows(self, tenant: str | None, also_closed_by: str) -> list[dict[str, Any]]:
        """The other replicas' open sessions of ``tenant`` (every tenant's with None), as of
        their last beat, in ``SessionsStage.open_sessions``'s shape with ``replica``."""
        now = self._clock()
        return [
            {
                "session_id": row["session_id"],
                "tenant": row["tenant"],
                "revision": int(row["revision"]),
                "spans": int(row["spans"]),
                "skill_loads": int(row["skill_loads"]),
                "idle_seconds": round(max(0.0, now - float(row["seen_at"])), 1),
                "closes_in_seconds": round(max(0.0, float(row["closes_at"]) - now), 1),
                "closes_by": row["closes_by"],
                "also_closed_by": also_closed_by,
                "replica": row["replica"],
            }
            for row in self._others
            if tenant is None or row["tenant"] == tenant
        ]


def merged(local: list[dict[str, Any]], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This replica's open sessions and the others', soonest to close first."""
    if not others:
        return local
    return sorted([*local, *others], key=lambda row: (row["closes_in_seconds"], row["session_id"]))


def _key(row: dict[str, Any]) -> str:
    return session_key(row["tenant"], row["session_id"])
