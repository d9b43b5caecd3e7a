"""A kept revision's reopenable rows are written only when a checkpoint would delete what
its closed row holds (``Revisions.write_kept``): one kept and let go between two checkpoints
costs the store nothing; one a crash left with its closed row only is found again at the
restart (``unwritten_kept``) and written by the first checkpoint that needs it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.db import migrate
from collector.state.facade import Store
from collector.state.revisions import Revisions, unwritten_kept
from collector.state.types import Closed, Recovery, Reopenable

TRACE = "ab" * 16


def kept(session: str, revision: int, requests: tuple[int, ...]) -> Reopenable:
    return Reopenable(session, revision, requests[0], requests, (TRACE,), len(requests))


def rows(db: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return (
        db.execute("SELECT session, revision FROM reopenable ORDER BY session").fetchall(),
        db.execute("SELECT request, session FROM held ORDER BY request").fetchall(),
    )


def test_only_what_a_checkpoint_would_delete_is_written_and_only_what_was_written_is_deleted() -> None:
    queued: list[Callable[[sqlite3.Connection], Any]] = []
    revisions = Revisions(queued.append)
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate.create_empty(db)

    def run_queued() -> None:
        while queued:
            queued.pop(0)(db)

    revisions.keep_reopenable(kept("a", 1, (1, 2)))
    revisions.forget_reopenable("a")  # let go before any checkpoint
    revisions.write_kept(100)
    assert queued == []  # nothing written, nothing to delete
    revisions.keep_reopenable(kept("b", 1, (3, 5)))
    revisions.keep_reopenable(kept("c", 1, (50,)))  # after replay_from: its closed row stays
    revisions.write_kept(10)
    run_queued()
    assert rows(db) == ([("b", 1)], [(3, "b"), (5, "b")])
    revisions.forget_reopenable("c")  # never written
    revisions.keep_reopenable(kept("b", 2, (3, 5, 8)))  # reopened and kept again
    revisions.forget_reopenable("b")  # its rows, written before, go
    run_queued()
    assert rows(db) == ([], [])
    revisions.keep_reopenable(kept("d", 1, (60,)))
    revisions.write_kept()  # all of them (a clean shutdown)
    run_queued()
    assert rows(db) == ([("d", 1)], [(60, "d")])


def test_a_kept_revision_a_crash_left_with_its_closed_row_only_keeps_its_requests(tmp_path: Path) -> None:
    async def crash_before_a_checkpoint() -> list[int]:
        spool = Store(tmp_path)
        ids = [await spool.append("traces", f"request {n}".encode()) for n in range(3)]
        spool.record_closed(Closed("s", 1, "idle_timeout", ids[0], ids[1], (TRACE,)))
        await spool.save_coverage([("s", 1, [], '{"session_id": "s", "revision": 1}')])
        spool.keep_reopenable(kept("s", 1, (ids[0], ids[1])))
        # kill -9: what was committed stays, the kept revision was never written.
        await spool._writer.stop(10)
        spool.log.close()
        spool.location.close()
        return ids

    async def restart(ids: list[int]) -> None:
        spool = Store(tmp_path)
        recovery = spool.recovery()
        assert recovery.reopenable == []
        assert unwritten_kept(recovery) == [Reopenable("s", 1, ids[0], (ids[0], ids[1]), (TRACE,), 0)]
        await spool.checkpoint(ids[2] + 1)  # no open session needs any of them
        assert [r for r, _, _ in await spool.read_requests(tuple(ids))] == [ids[0], ids[1]]
        await spool.shutdown()

    ids = asyncio.run(crash_before_a_checkpoint())
    asyncio.run(restart(ids))

    async def again() -> None:
        spool = Store(tmp_path)
        assert spool.recovery().reopenable == [Reopenable("s", 1, ids[0], (ids[0], ids[1]), (TRACE,), 0)]
        await spool.shutdown()

    asyncio.run(again())


def test_only_a_sessions_latest_evaluated_revision_closed_to_reopen_whole_is_found() -> None:
    recovery = Recovery(
        closed={
            "idle": [
                Closed("idle", 1, "idle_timeout", 1, 2, (TRACE,)),
                Closed("idle", 2, "end_attribute", 3, 4, ()),
            ],
            "cut": [Closed("cut", 1, "max_spans", 1, 1, ())],
            "open": [Closed("open", 1, "idle_timeout", 5, 5, ())],  # not evaluated
            "later": [Closed("later", 1, "idle_timeout", 6, 6, ())],  # a later revision evaluated
            "stored": [Closed("stored", 1, "idle_timeout", 7, 7, ())],  # its row was written
            TRACE: [Closed(TRACE, 1, "idle_timeout", 8, 8, (TRACE,))],  # named by its trace
        },
        evaluated={("idle", 2), ("cut", 1), ("later", 1), ("stored", 1), (TRACE, 1)},
        latest={"later": 2},
        reopenable=[kept("stored", 1, (7,))],
    )
    assert unwritten_kept(recovery) == [Reopenable("idle", 2, 3, (3, 4), (), 0)]
