"""A request is acknowledged only once its bytes are synced: the appends made while a sync
runs wait on the next ``fdatasync``, one for them all, run off the loop; a sync that fails
refuses them as retryable.
The sync is a seam (``sync``), so a test holds it back."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest
from support import FRAMEWORKS, trace_requests

from collector.component import Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.service import Chain
from collector.state import synced
from collector.state.facade import Store, open_spool
from collector.state.segments import Segments
from collector.switching import LONG, SHORT, Switching


class HeldSync:
    """``os.fdatasync`` that waits for ``release`` before it syncs; records each file synced
    (its inode) and each run's calls."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.synced: list[int] = []
        self.fail: OSError | None = None
        self._fdatasync = os.fdatasync  # the real one, should a test put this in its place

    def __call__(self, fd: int) -> None:
        self.entered.set()
        assert self.released.wait(30), "never released"
        if self.fail is not None:
            raise self.fail
        self.synced.append(os.fstat(fd).st_ino)
        self._fdatasync(fd)


async def test_the_acknowledgement_waits_for_the_sync_of_the_request_bytes(tmp_path: Path) -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    sync = HeldSync()
    store = Store(tmp_path, sync=sync)
    chain = Chain(parse({"storage": {"path": str(tmp_path)}}), store=store)
    items = [Received("traces", request, "test") for _ in range(3)]
    # Three requests in one loop turn: each is written, then waits for a sync; the first
    # append starts one at once, the two written while it runs share the next.
    acks = [asyncio.create_task(chain.consume(item)) for item in items]
    assert await asyncio.to_thread(sync.entered.wait, 30)  # the loop ran meanwhile
    assert not any(ack.done() for ack in acks) and chain.open_count() == 0
    sync.released.set()
    await asyncio.gather(*acks)  # answered once the syncs returned
    assert all(item.outcome.accepted for item in items)
    segment = next((tmp_path / "requests").glob("*.seg"))
    assert sync.synced == [segment.stat().st_ino] * 2  # two syncs for the three
    await chain.sessions_stage.settle()
    assert chain.open_count() == 1
    await chain.shutdown(5)


async def test_a_sync_that_fails_refuses_the_request_as_retryable(tmp_path: Path) -> None:
    sync = HeldSync()
    sync.fail = OSError(errno.EIO, os.strerror(errno.EIO))
    sync.released.set()
    store = Store(tmp_path, sync=sync)
    with pytest.raises(Retryable) as refused:
        await store.append("traces", b"a" * 100)
    assert refused.value.reason == "storage_error" and "Input/output error" in str(refused.value)
    assert store.faults.write_failures["request"] == 1
    sync.fail = None  # the disk works again: the frame left behind is synced with the next
    assert await store.append("traces", b"b" * 100) == 2
    await store.shutdown(5)


def test_a_sync_covers_the_files_appended_to_since_the_last_one(tmp_path: Path) -> None:
    sync = HeldSync()
    sync.released.set()
    segments = Segments(tmp_path, segment_bytes=100, sync=sync)
    segments.append(b"a" * 150, request=1)
    segments.append(b"b" * 150, request=2)  # the first file is full: a second one
    segments.sync()
    assert sorted(sync.synced) == sorted(p.stat().st_ino for p in tmp_path.glob("*.seg"))
    segments.sync()  # nothing new in the first file: only the current one
    assert sync.synced[2:] == [(tmp_path / "00000002.seg").stat().st_ino]
    segments.close()


async def test_storage_sync_chooses_whether_an_append_waits_for_the_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldSync()  # never released: an append that waits for it does not return
    monkeypatch.setattr(os, "fdatasync", held)
    off = open_spool(parse({"storage": {"path": str(tmp_path / "off"), "sync": False}}).storage)
    assert await off.append("traces", b"a" * 100) == 1  # written, not synced
    assert not held.entered.is_set()
    await off.shutdown(5)
    on = open_spool(parse({"storage": {"path": str(tmp_path / "on")}}).storage)
    append = asyncio.create_task(on.append("traces", b"a" * 100))
    assert await asyncio.to_thread(held.entered.wait, 30)  # the default syncs
    assert not append.done()
    held.released.set()
    assert await append == 1
    await on.shutdown(5)


async def test_the_switch_interval_is_short_while_a_sync_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serve's switch interval (``collector.switching``) is short while a sync runs, even with
    a backlog, so its thread wins the GIL back soon; long again once it returned."""
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.start()
    switching.backlog(True)
    monkeypatch.setattr(synced, "SWITCHING", switching)
    during: list[float | None] = []

    def fdatasync(fd: int) -> None:
        during.append(switching.interval)
        os.fdatasync(fd)

    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    store = Store(tmp_path, sync=fdatasync)
    chain = Chain(parse({"storage": {"path": str(tmp_path)}}), store=store)
    for _ in range(2):
        item = Received("traces", request, "test")
        await chain.consume(item)
        assert item.outcome.accepted
        assert switching.interval == LONG
    await chain.shutdown(5)
    assert during and set(during) == {SHORT}
    assert intervals[:4] == [SHORT, LONG, SHORT, LONG]


async def test_a_sync_starts_within_the_turn_of_the_append_that_finds_none_running(tmp_path: Path) -> None:
    """An acknowledgement waits behind whatever the loop has ready in each turn it takes: the
    append that finds no sync running starts one before the loop takes another turn."""
    sync = HeldSync()
    store = Store(tmp_path, sync=sync)
    append = asyncio.create_task(store.append("traces", b"a" * 100))
    await asyncio.sleep(0)  # the append's own turn: written, then waiting for a sync
    started = sync.entered.wait(30)  # the loop held here: no later turn can start it
    sync.released.set()
    assert started
    assert await append == 1
    await store.shutdown(5)


async def test_the_switch_interval_is_short_from_the_hand_off_to_the_sync_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread waiting for the GIL can starve behind a loop that gives it up and takes it back
    in every turn: the interval is made short on the loop, as the sync is handed off, not by
    the sync thread once it runs; long again once the sync returned."""
    setters: list[tuple[float, bool]] = []  # (interval, set on the loop's thread)
    loop_thread = threading.get_ident()
    switching = Switching(lambda interval: setters.append((interval, threading.get_ident() == loop_thread)))
    switching.start()
    switching.backlog(True)
    monkeypatch.setattr(synced, "SWITCHING", switching)
    group = synced.GroupSync(lambda: None)
    await group.wait()
    assert setters == [(SHORT, True), (LONG, True), (SHORT, True), (LONG, False)]
    assert group.runs == 1


async def test_a_sync_that_raises_what_is_no_exception_still_answers_its_waiters() -> None:
    """Whatever the sync raises, each waiter of its run is answered (an ``OSError``), and the
    next run is synced again."""
    raised: list[BaseException] = [SystemExit(3)]

    def sync() -> None:
        if raised:
            raise raised.pop()

    group = synced.GroupSync(sync)
    async with asyncio.timeout(30):  # a guard: unanswered, the waiters would wait forever
        # The first starts a run at once; the second, made while it runs, waits for the next.
        outcomes = await asyncio.gather(group.wait(), group.wait(), return_exceptions=True)
    assert isinstance(outcomes[0], OSError) and "SystemExit" in str(outcomes[0])
    assert outcomes[1] is None  # the thread went on to the next run
    assert group.runs == 2


async def test_syncs_run_on_a_thread_of_their_own_not_the_default_executor() -> None:
    """A sync's run is handed to the sync thread through a queue: no executor future wakes the
    loop to be set and checked besides the answer."""
    threads: list[str] = []
    group = synced.GroupSync(lambda: threads.append(threading.current_thread().name))
    await group.wait()
    await group.wait()
    assert threads == ["skillgauge-sync"] * 2
