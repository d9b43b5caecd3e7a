"""The spool's writer thread: requests before other work, rows batched, failures kept apart."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from collector.sessions.spool import Closed, SqliteSpool, encode_record

RECORD = {"evaluation": "skill_omission", "status": "not_applicable", "explanation": "x" * 200}


def _rows(tmp: Path, sql: str) -> list[Any]:
    with sqlite3.connect(tmp / "skillgauge.sqlite") as db:
        return list(db.execute(sql))


def test_a_request_is_committed_before_a_backlog_of_session_records(tmp_path: Path) -> None:
    async def run() -> tuple[int, int]:
        spool = SqliteSpool(tmp_path)
        # A slow first transaction, so that what follows queues up behind it.
        blocker = asyncio.ensure_future(spool.append("traces", b"x" * 20_000_000))
        backlog = [
            asyncio.ensure_future(spool.save_coverage(f"s{i}", 1, [encode_record(RECORD)], encode_record({"spans": i})))
            for i in range(3000)
        ]
        await asyncio.sleep(0)  # every task above has queued its work
        request = await spool.append("traces", b"request")
        done_before = sum(f.done() for f in backlog)
        await asyncio.gather(blocker, *backlog)
        await spool.shutdown()
        return request, done_before

    request, done_before = asyncio.run(run())
    assert request == 2
    # The request did not wait for the 3,000 coverage lines queued before it: it shared a
    # transaction with at most 64 of them (first come, first served would have committed all).
    assert done_before <= 2 * 64, done_before
    assert _rows(tmp_path, "SELECT COUNT(*), SUM(json_array_length(record, '$.results')) FROM coverage") == [
        (3000, 3000)
    ]


def test_rows_of_many_sessions_share_statements_and_all_arrive(tmp_path: Path) -> None:
    async def run() -> int:
        spool = SqliteSpool(tmp_path)
        for i in range(700):
            spool.record_closed(Closed(f"s{i}", 1, "idle_timeout", 1, 1, ("ab" * 16,)))
        await asyncio.gather(
            *(
                spool.save_coverage(f"s{i}", 1, [encode_record(RECORD) for j in range(3)], encode_record({"spans": i}))
                for i in range(700)
            )
        )
        await spool.shutdown()
        return spool.commits

    commits = asyncio.run(run())
    assert commits <= 40, commits  # 1,400 queued writes: 64 to a transaction, not one each
    assert _rows(tmp_path, "SELECT COUNT(*) FROM closed") == [(700,)]
    assert _rows(tmp_path, "SELECT SUM(json_array_length(record, '$.results')) FROM coverage") == [(2100,)]
    spans = {
        s: r for s, r in _rows(tmp_path, "SELECT session, json_extract(record, '$.spans') FROM coverage")
    }
    assert spans == {f"s{i}": i for i in range(700)}


def test_a_bad_row_fails_alone_and_the_rest_of_its_batch_commits(tmp_path: Path) -> None:
    async def run() -> list[BaseException | None]:
        spool = SqliteSpool(tmp_path)
        saves = [
            spool.save_result("good-1", "s", 1, RECORD),
            spool.save_result(object(), "s", 1, RECORD),  # type: ignore[arg-type]  # cannot be bound
            spool.save_result("good-2", "s", 1, RECORD),
        ]
        outcomes = await asyncio.gather(*saves, return_exceptions=True)
        await spool.shutdown()
        return outcomes

    good_1, bad, good_2 = asyncio.run(run())
    assert good_1 is None and good_2 is None
    assert isinstance(bad, sqlite3.ProgrammingError)
    assert sorted(_rows(tmp_path, "SELECT key FROM results")) == [("good-1",), ("good-2",)]


@pytest.mark.parametrize("requests", [0, 5, 40])
def test_checkpoint_deletes_every_request_before_replay_from_a_few_at_a_time(
    tmp_path: Path, requests: int
) -> None:
    async def run() -> None:
        spool = SqliteSpool(tmp_path)
        ids = [await spool.append("traces", b"r" * 1000) for _ in range(requests + 1)]
        await spool.checkpoint(ids[-1])
        await spool.shutdown()

    asyncio.run(run())
    assert _rows(tmp_path, "SELECT COUNT(*) FROM requests") == [(1,)]


def test_a_new_spool_uses_large_pages_and_an_existing_one_keeps_its_own(tmp_path: Path) -> None:
    async def open_and_close(path: Path) -> None:
        spool = SqliteSpool(path)
        await spool.append("traces", b"x" * 100_000)
        await spool.shutdown()

    asyncio.run(open_and_close(tmp_path / "new"))
    assert _rows(tmp_path / "new", "PRAGMA page_size") == [(16384,)]
    (tmp_path / "old").mkdir()
    with sqlite3.connect(tmp_path / "old" / "skillgauge.sqlite") as db:  # made before this change
        db.execute("PRAGMA page_size=4096")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
    asyncio.run(open_and_close(tmp_path / "old"))
    assert _rows(tmp_path / "old", "PRAGMA page_size") == [(4096,)]
    assert _rows(tmp_path / "old", "SELECT count(*) FROM requests") == [(1,)]
