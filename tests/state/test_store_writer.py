"""The spool's writer thread: requests before other work, rows batched, failures kept apart."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from collector.component import Retryable
from collector.state.facade import Store
from collector.state.segments import HEADER_BYTES, Spooled
from collector.state.types import Closed, encode_record

RECORD = {"evaluation": "skill_omission", "status": "not_applicable", "explanation": "x" * 200}


def _rows(tmp: Path, sql: str) -> list[Any]:
    with sqlite3.connect(tmp / "skillgauge.sqlite") as db:
        return list(db.execute(sql))


def test_a_request_is_acknowledged_without_waiting_for_a_backlog_of_session_records(tmp_path: Path) -> None:
    async def run() -> tuple[int, int]:
        spool = Store(tmp_path)
        # The writer held until the request is answered, 3,000 coverage lines queued behind.
        gate = threading.Event()
        spool._writer.put(lambda db: gate.wait())
        backlog = [
            asyncio.ensure_future(
                spool.save_coverage([(f"s{i}", 1, [encode_record(RECORD)], encode_record({"spans": i}))])
            )
            for i in range(3000)
        ]
        await asyncio.sleep(0)  # every task above has queued its work
        request = await spool.append("traces", b"request")  # written and synced: its row waits
        done_before = sum(f.done() for f in backlog)
        gate.set()
        await asyncio.gather(*backlog)
        await spool.shutdown()
        return request, done_before

    request, done_before = asyncio.run(run())
    assert (request, done_before) == (1, 0)
    assert _rows(tmp_path, "SELECT id FROM spooled") == [(1,)]
    assert _rows(tmp_path, "SELECT COUNT(*), SUM(json_array_length(record, '$.results')) FROM coverage") == [
        (3000, 3000)
    ]


def test_rows_of_many_sessions_share_statements_and_all_arrive(tmp_path: Path) -> None:
    async def run() -> int:
        spool = Store(tmp_path)
        # Hold the writer until every write below is queued, whatever the machine's pace.
        gate = threading.Event()
        spool._writer.put(lambda db: gate.wait())
        for i in range(700):
            spool.record_closed(Closed(f"s{i}", 1, "idle_timeout", 1, 1, ("ab" * 16,)))
        saved = [
            asyncio.ensure_future(
                spool.save_coverage(
                    [(f"s{i}", 1, [encode_record(RECORD) for j in range(3)], encode_record({"spans": i}))]
                )
            )
            for i in range(700)
        ]
        await asyncio.sleep(0)  # every save above has queued its rows
        gate.set()
        await asyncio.gather(*saved)
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
        spool = Store(tmp_path)
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
def test_checkpoint_deletes_every_request_before_replay_from_and_the_files_they_filled(
    tmp_path: Path, requests: int
) -> None:
    async def run() -> None:
        spool = Store(tmp_path)
        spool.log._segments._segment_bytes = 3000  # three requests a file
        ids = [await spool.append("traces", b"r" * 1000) for _ in range(requests + 1)]
        await spool.checkpoint(ids[-1])
        assert [(i, p) for i, _, p, _ in spool.requests(1)] == [(ids[-1], b"r" * 1000)]
        await spool.shutdown()

    asyncio.run(run())
    assert _rows(tmp_path, "SELECT COUNT(*) FROM spooled") == [(1,)]
    assert len(list((tmp_path / "requests").iterdir())) == 1  # the last request's file


def test_request_ids_never_go_back_even_when_every_request_was_deleted(tmp_path: Path) -> None:
    async def run() -> list[int]:
        spool = Store(tmp_path)
        first = [await spool.append("traces", b"a"), await spool.append("traces", b"b")]
        await spool.checkpoint(first[-1] + 1)  # nothing is needed any more: every row goes
        later = await spool.append("traces", b"c")
        await spool.shutdown()
        spool = Store(tmp_path)  # a restart: the last checkpoint said replay from 3
        again = await spool.append("traces", b"d")
        await spool.shutdown()  # its row is committed by then (an append only queues it)
        replayed = [payload for _, _, payload, _ in spool.requests(spool.recovery().replay_from)]
        assert replayed == [b"c", b"d"]
        return [*first, later, again]

    assert asyncio.run(run()) == [1, 2, 3, 4]


def test_a_request_whose_bytes_are_gone_is_quarantined_with_a_warning_and_the_rest_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> list[bytes]:
        spool = Store(tmp_path)
        spool.log._segments._segment_bytes = 1
        for payload in (b"one", b"two", b"three"):
            await spool.append("traces", payload)
        await spool.transact(lambda db: None)  # their rows are committed (an append queues its row)
        torn = tmp_path / "requests" / "00000002.seg"
        torn.write_bytes(torn.read_bytes()[: HEADER_BYTES + 1])  # its frame header and b"t"
        replayed = [payload for _, _, payload, _ in spool.requests(1)]
        await spool.shutdown()
        return replayed

    assert asyncio.run(run()) == [b"one", b"three"]
    assert "spooled request 2 is unreadable and was quarantined" in caplog.text
    assert "1 of 3 bytes" in caplog.text
    assert (tmp_path / "quarantine" / "2.traces.binpb").read_bytes() == b"t"  # what was left of it


def test_requests_spooled_as_blobs_by_an_older_version_move_to_a_segment_with_their_ids(
    tmp_path: Path,
) -> None:
    asyncio.run(Store(tmp_path).shutdown())  # the schema; then an older version's table
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        db.execute(
            "CREATE TABLE requests (id INTEGER PRIMARY KEY, received_at REAL NOT NULL, "
            "signal TEXT NOT NULL, payload BLOB NOT NULL)"
        )
        db.executemany(
            "INSERT INTO requests VALUES (?, 0, ?, ?)", [(7, "traces", b"x" * 10), (9, "logs", b"y")]
        )

    async def run() -> list[tuple[int, str, bytes, str]]:
        spool = Store(tmp_path)
        new = await spool.append("traces", b"z")
        found = list(spool.requests(1))
        await spool.shutdown()
        assert new == 10
        return found

    assert asyncio.run(run()) == [(7, "traces", b"x" * 10, ""), (9, "logs", b"y", ""), (10, "traces", b"z", "")]
    assert _rows(tmp_path, "SELECT name FROM sqlite_master WHERE name = 'requests'") == []


def test_a_new_spool_uses_small_pages_and_an_existing_one_keeps_its_own(tmp_path: Path) -> None:
    async def open_and_close(path: Path) -> None:
        spool = Store(path)
        await spool.append("traces", b"x" * 100_000)
        await spool.shutdown()

    asyncio.run(open_and_close(tmp_path / "new"))
    assert _rows(tmp_path / "new", "PRAGMA page_size") == [(4096,)]
    (tmp_path / "old").mkdir()
    with sqlite3.connect(tmp_path / "old" / "skillgauge.sqlite") as db:  # made with 16 KB pages
        db.execute("PRAGMA page_size=16384")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
    asyncio.run(open_and_close(tmp_path / "old"))
    assert _rows(tmp_path / "old", "PRAGMA page_size") == [(16384,)]
    assert _rows(tmp_path / "old", "SELECT count(*) FROM spooled") == [(1,)]


def test_a_request_whose_bytes_cannot_be_written_fails_alone_and_the_writer_goes_on(tmp_path: Path) -> None:
    async def run() -> tuple[BaseException | int, int]:
        spool = Store(tmp_path)
        write = spool.log._segments.append_locked

        def full_disk(payload: bytes, *where: str | int) -> Spooled:
            raise OSError(28, "No space left on device")

        spool.log._segments.append_locked = full_disk  # type: ignore[method-assign]
        # (A writer thread killed by the error would never answer: wait_for makes that a failure.)
        failed = await asyncio.gather(
            asyncio.wait_for(spool.append("traces", b"lost"), 5), return_exceptions=True
        )
        spool.log._segments.append_locked = write  # type: ignore[method-assign]
        kept = await asyncio.wait_for(spool.append("traces", b"kept"), 5)
        assert [p for _, _, p, _ in spool.requests(1)] == [b"kept"]
        await spool.shutdown()
        return failed[0], kept

    failed, kept = asyncio.run(run())
    # Refused as retryable (the sender tries again), with the disk's error as its cause.
    assert isinstance(failed, Retryable) and isinstance(failed.__cause__, OSError) and kept > 0
