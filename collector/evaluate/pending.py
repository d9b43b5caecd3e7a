"""The judge queue's rows in the shared store, written so that any replica can finish them.

* ``judge_pending``: which evaluation of which closed revision waits for the judge, since
  when, and how often its call failed.  A restart (or a replica taking the revision over)
  queues them again with the time each first waited: ``judge.max_wait`` counts across both.
* ``judge_revisions``: each revision with queued work, with its closed session's evidence
  (``collector.evaluate.evidence_codec``) and close time, leased (``collector.db.lease``) to
  the replica evaluating it.  Its row goes when the revision's coverage commits
  (``collector.state.verdicts``); while it waits, a live replica renews its lease and another
  takes a lapsed one over (``collector.evaluate.takeover``), plans the session again from the
  evidence, reuses the verdicts committed under their keys, and asks the judge only for the
  rest.

Each note is a write nobody waits for, committed with the store's next group
(``Spool.defer``), in SQL both dialects read; the evidence is encoded in the writer's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from collector.db.shared import Db
from collector.evaluate.evidence_codec import encode
from collector.evaluate.takeover import LeasingStore, Resuming, Takeover
from collector.state.types import PendingJudge, revision_key
from evaluators.evidence import Session

_COLUMNS = ("key", "session", "revision", "evaluation", "enqueued_at", "lease_owner")
_REVISION = ("key", "session", "revision", "evidence", "closed_at", "lease_owner", "lease_expires")


class DeferringStore(LeasingStore, Protocol):
    """The part of ``collector.state.types.Spool`` the judge queue uses."""

    durable: bool

    def defer(self, work: Callable[[Db], Any]) -> None: ...


class StoredPending:
    """``collector.evaluate.runner.PendingWork`` kept in the store, each revision leased to
    the replica evaluating it."""

    def __init__(self, store: DeferringStore) -> None:
        self._store = store
        self.durable = store.durable

    def pending_add(self, rows: list[PendingJudge], session: Session, closed_at: float) -> None:
        """Queued work of ``session`` (closed at ``closed_at``, unix seconds), leased to this
        replica: kept as first noted (a row queued again keeps its time)."""
        if not rows:
            return
        owner, lease = self._store.replica, self._store.lease_seconds
        values = [(*row, owner) for row in rows]

        def write(db: Db) -> None:
            key = revision_key(session.key, session.revision)
            revision = (
                key,
                session.key,
                session.revision,
                encode(session),
                closed_at,
                owner,
                time.time() + lease,
            )
            db.insert(
                "judge_revisions",
                _REVISION,
                [revision],
                "ON CONFLICT (key) DO UPDATE SET lease_owner = excluded.lease_owner, "
                "lease_expires = excluded.lease_expires",
            )
            db.insert("judge_pending", _COLUMNS, values, "ON CONFLICT (key) DO NOTHING")

        self._store.defer(write)

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        """A failed call of waiting work."""
        params = {"attempts": attempts, "error": error[:500], "key": key}
        self._store.defer(
            lambda db: db.execute(
                "UPDATE judge_pending SET attempts = :attempts, last_error = :error WHERE key = :key", params
            )
        )

    def takeover(self, runner: Resuming) -> Takeover:
        """The leases of the work ``runner`` queues here, renewed while it lives, and the
        takeover of other replicas' lapsed ones."""
        return Takeover(self._store, runner)

    def pending_done(self, keys: list[str]) -> None:
        """Work that has its final row."""
        if keys:
            self._store.defer(lambda db: _delete(db, keys))


def _delete(db: Db, keys: list[str]) -> None:
    for start in range(0, len(keys), 256):
        names, params = db.in_("k", keys[start : start + 256])
        db.execute(f"DELETE FROM judge_pending WHERE key IN {names}", params)
