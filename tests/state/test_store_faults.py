"""The spool when storage fails: a full disk mid-request, a full database, a bug in a write.

A failed request leaves the files as they were and is refused as retryable; the store says
it is unavailable until a write succeeds again; writes nobody waits for are retried; the
writer thread never dies.  The disk is a seam (``write``), so these run anywhere.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from collector.component import Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.receiver.errors import Backpressure, sorted_error
from collector.service import Chain
from collector.state.facade import Store
from collector.state.segments import HEADER_BYTES
from collector.state.types import Closed


class Disk:
    """``os.write`` with a capacity: a write past it writes what fits, the next raises ENOSPC."""

    def __init__(self, free: int | None = None) -> None:
        self.free = free  # None: no limit
        self.refused = 0

    def __call__(self, fd: int, data: memoryview) -> int:
        if self.free is None:
            return os.write(fd, data)
        if self.free <= 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, data[: self.free])
        self.free -= written
        return written


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    """Wait for a condition the writer thread makes true, polling the loop (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def test_a_request_cut_short_by_a_full_disk_is_cut_off_its_segment_and_the_next_ones_replay(
    tmp_path: Path,
) -> None:
    disk = Disk()

    async def first_life() -> tuple[BaseException, int]:
        spool = Store(tmp_path, write=disk)
        await spool.append("traces", b"a" * 1000)
        disk.free = 300  # the next request gets 300 of its 1,000 bytes written, then ENOSPC
        with pytest.raises(Retryable) as refused:
            await spool.append("traces", b"b" * 1000)
        disk.free = None  # space again
        await spool.append("traces", b"c" * 1000)
        # The rows queued so far are written (the writer gathers them for up to 50 ms): its
        # thread, which outlives this "process", must not hold the database when the next opens.
        await spool.transact(lambda db: None)
        return refused.value, (tmp_path / "requests" / "00000001.seg").stat().st_size
        # no shutdown: the process dies here (kill -9)

    refused, size = asyncio.run(first_life())
    assert refused.reason == "storage_error" and refused.retry_after > 0
    assert "No space left on device" in str(refused)
    assert size == 2 * (HEADER_BYTES + 1000)  # the 300 bytes of the refused request are gone
    replayed = [(i, p) for i, _, p, _ in Store(tmp_path).requests(1)]
    assert replayed == [(1, b"a" * 1000), (2, b"c" * 1000)]


def test_a_refused_request_answers_as_retryable_storage_error() -> None:
    error = sorted_error(Retryable("full", retry_after=5.0, reason="storage_error"))
    assert isinstance(error, Backpressure)
    assert (error.reason, error.retry_after, error.http_status) == ("storage_error", 5.0, 503)


def test_the_chain_is_unavailable_while_writes_fail_and_ready_once_storage_works_again(
    tmp_path: Path,
) -> None:
    from support import FRAMEWORKS, trace_requests

    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    disk = Disk()

    async def run() -> list[str]:
        spool = Store(tmp_path, write=disk)
        await _until(lambda: spool.commits >= 1)  # the probe at startup found room
        disk.free = 0
        chain = Chain(
            parse({"storage": {"path": str(tmp_path)}, "sessions": {"idle_timeout": "1h"}}), store=spool
        )
        await chain.start()
        chain.ready = True
        states = [chain.state()]
        with pytest.raises(Retryable):
            await chain.consume(Received("traces", request, "test"))
        states.append(chain.state())
        chain.refresh()
        failures = chain.registry.get_sample_value(
            "skillgauge_storage_write_failures_total", {"write": "request"}
        )
        assert failures == 1
        # No request comes while /readyz says 503: the store probes by itself.
        await _until(lambda: disk.refused >= 2)  # a probe was refused too: still unavailable
        states.append(chain.state())
        disk.free = None
        await _until(lambda: chain.state() == "ready")
        states.append(chain.state())
        await chain.consume(Received("traces", request, "test"))  # acknowledged again
        await chain.sessions_stage.settle()
        assert chain.open_count() == 1
        await spool.shutdown()
        return states

    assert asyncio.run(run()) == ["ready", "storage_unavailable", "storage_unavailable", "ready"]


def test_closed_revisions_that_cannot_be_committed_are_retried_and_the_failure_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = ("ab" * 16,) * 2000  # ~66 KB a row: more than the database's free pages hold

    async def run() -> None:
        spool = Store(tmp_path)
        (pages,) = await spool._submit(lambda db: db.execute("PRAGMA page_count").fetchone())
        await spool._submit(lambda db: db.execute(f"PRAGMA max_page_count = {pages}"))  # the file is full
        for i in range(5):
            spool.record_closed(Closed(f"s{i}", 1, "idle_timeout", 1, 1, traces))
        await _until(lambda: spool.faults.write_failures["write"] >= 10)  # tried, failed, tried again
        assert spool.faults.unavailable is not None
        assert "database or disk is full" in spool.faults.unavailable
        await spool._submit(lambda db: db.execute("PRAGMA max_page_count = 1000000"))  # space again
        await _until(lambda: spool.faults.unavailable is None)
        assert await spool.append("traces", b"after") > 0
        await spool.shutdown()

    with caplog.at_level(logging.WARNING, logger="collector.db.writer"):
        asyncio.run(run())
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM closed").fetchone() == (5,)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "a write failed" in errors[0].getMessage()
    assert "storage works again" in caplog.text


def test_a_spool_opened_on_a_full_disk_is_unavailable_before_any_request(tmp_path: Path) -> None:
    disk = Disk(free=0)

    async def run() -> tuple[str | None, int]:
        spool = Store(tmp_path, write=disk)
        await _until(lambda: spool.faults.unavailable is not None)  # the probe at startup
        await spool.shutdown()
        return spool.faults.unavailable, spool.faults.write_failures["request"]

    unavailable, failed_requests = asyncio.run(run())
    assert unavailable is not None and "ENOSPC" in unavailable
    assert failed_requests == 0  # a probe is not a request


def test_a_write_that_raises_a_bug_fails_alone_and_the_writer_goes_on(tmp_path: Path) -> None:
    async def run() -> tuple[BaseException | None, int]:
        spool = Store(tmp_path)
        # Queued together, so that they share a transaction (the group path).
        bad = spool._submit(lambda db: 1 // 0)
        good = spool.save_result("k", "s", 1, {"x": 1})
        outcomes = await asyncio.wait_for(asyncio.gather(bad, good, return_exceptions=True), 5)
        after = await asyncio.wait_for(spool.append("traces", b"x"), 5)
        await spool.shutdown()
        assert outcomes[1] is None
        return outcomes[0], after

    bad, after = asyncio.run(run())
    assert isinstance(bad, ZeroDivisionError) and after == 1
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        assert db.execute("SELECT key FROM results").fetchall() == [("k",)]


def test_an_evaluated_session_that_cannot_be_recorded_is_recorded_once_storage_works_again(
    tmp_path: Path,
) -> None:
    from support import FRAMEWORKS, trace_requests

    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")

    async def run() -> tuple[int, dict[tuple[str, int], int]]:
        spool = Store(tmp_path)
        chain = Chain(
            parse({"storage": {"path": str(tmp_path)}, "sessions": {"idle_timeout": "1h"}}), store=spool
        )
        await chain.start()
        real, calls = spool.save_coverage, 0

        async def full_twice(revisions: Any, lines: Any = None) -> None:
            nonlocal calls
            calls += 1
            if calls <= 2:
                raise sqlite3.OperationalError("database or disk is full")
            await real(revisions, lines)

        spool.save_coverage = full_twice  # type: ignore[method-assign]
        await chain.consume(Received("traces", request, "test"))
        await chain.sessions_stage.settle()
        await chain.sessions_stage.close("strands-right_skill-0001", "end_attribute")
        await chain.drain(timeout=30)
        await spool.shutdown()
        return calls, dict(spool.unfinished)

    calls, unfinished = asyncio.run(run())
    # Without the retries the revision would stay unfinished, holding its requests in the
    # spool until a restart evaluated it again.
    assert calls == 3 and unfinished == {}
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        assert db.execute("SELECT session, revision FROM coverage").fetchall() == [
            ("strands-right_skill-0001", 1)
        ]


def test_a_damaged_spool_file_is_refused_with_its_path_and_a_fix_and_left_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "skillgauge.sqlite"
    damaged = b"not a spool " * 1000
    db.write_bytes(damaged)
    with pytest.raises(RuntimeError) as refused:
        Store(tmp_path)
    message = str(refused.value)
    assert message.startswith(
        f"storage.path: refusing to start: the database {db} is damaged (file is not a database)"
    )
    assert "`skillgauge recover --config FILE`" in message
    assert f"or move {tmp_path} aside" in message
    assert db.read_bytes() == damaged  # nothing written over what an operator may still recover
