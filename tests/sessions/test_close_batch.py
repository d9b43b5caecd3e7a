"""Due sessions close a slice at a time between event-loop turns while the loop has no backlog
(acknowledgements wait behind no long turn: a slice of closes lasts about as long as a slice of
assembly), a batch of many at a time while requests wait to be assembled (throughput is then
the bound)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import parse
from collector.otlp.received import Received, Spooled
from collector.service import Chain
from collector.sessions import stage as stage_module
from collector.sessions.items import SLICE_SECONDS
from collector.sessions.stage import close_batch
from collector.testing import memory_store

SESSIONS = 150


def sessions_request(count: int) -> ExportTraceServiceRequest:
    """One span in each of ``count`` sessions (``session.id`` on the span)."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in range(count):
        span = spans.add()
        span.trace_id = (n + 1).to_bytes(16, "big")
        span.span_id = (n + 1).to_bytes(8, "big")
        span.name = "invoke_agent"
        span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
        attribute = span.attributes.add()
        attribute.key = "session.id"
        attribute.value.string_value = f"session-{n}"
    return request


async def closing(
    waiting: int, cost: float = 0.0, monkeypatch: pytest.MonkeyPatch | None = None
) -> list[tuple[int | None, int, int]]:
    """(limit, closed, turn) of each ``close_due`` call the ticker makes to close ``SESSIONS``
    due sessions while ``waiting`` requests wait to be assembled; ``turn`` counts the event
    loop's turns, and each session closed takes ``cost`` seconds of the slices' clock."""
    chain = Chain(
        parse({"sessions": {"idle_timeout": "10s", "check_interval": "0.01s"}}), store=memory_store()
    )
    stage = chain.sessions_stage
    now = [0.0]
    stage.assembler._clock = lambda: now[0]
    slice_clock = [0.0]
    if monkeypatch is not None:
        monkeypatch.setattr(stage_module, "_clock", lambda: slice_clock[0])
    await chain.consume(Received("traces", sessions_request(SESSIONS), "test"))
    await stage.settle()
    assert stage.assembler.open_count == SESSIONS
    placeholder = Spooled(Received("traces", ExportTraceServiceRequest(), "test"), 0)
    stage._pending.extend([placeholder] * waiting)  # not woken: they stay waiting
    calls: list[tuple[int | None, int, int]] = []
    close_due = stage.assembler.close_due
    turns = [0]

    async def count_turns() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    def recording(limit: int | None = None) -> int:
        closed = close_due(limit)
        slice_clock[0] += cost * closed
        calls.append((limit, closed, turns[0]))
        return closed

    stage.assembler.close_due = recording  # type: ignore[method-assign]
    counter = asyncio.create_task(count_turns())
    now[0] = 100.0  # every session idle past its timeout
    stage.start()
    try:
        async with asyncio.timeout(10):
            while stage.assembler.open_count:
                await asyncio.sleep(0.01)
    finally:
        assert stage._ticker is not None
        for task in (stage._ticker, counter):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        stage._pending.clear()  # the placeholders are no requests
        await chain.shutdown(5)
    return calls


def closed_per_turn(calls: list[tuple[int | None, int, int]]) -> list[int]:
    """How many sessions closed in each event-loop turn that closed any."""
    per_turn: dict[int, int] = {}
    for _, closed, turn in calls:
        if closed:
            per_turn[turn] = per_turn.get(turn, 0) + closed
    return list(per_turn.values())


async def test_without_a_backlog_due_sessions_close_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each close takes a millisecond: a slice holds at most SLICE_SECONDS of them, and one more.
    calls = await closing(waiting=0, cost=0.001, monkeypatch=monkeypatch)
    assert close_batch(0) is None
    per_turn = closed_per_turn(calls)
    assert sum(per_turn) == SESSIONS
    assert max(per_turn) <= round(SLICE_SECONDS / 0.001) + 1


async def test_a_close_longer_than_a_slice_lets_the_loop_turn_before_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = await closing(waiting=0, cost=10 * SLICE_SECONDS, monkeypatch=monkeypatch)
    assert closed_per_turn(calls) == [1] * SESSIONS


async def test_with_a_backlog_due_sessions_close_in_larger_batches() -> None:
    calls = await closing(waiting=20)
    batch = close_batch(20)
    assert batch is not None and batch > round(SLICE_SECONDS / 0.001) + 1
    assert [(limit, closed) for limit, closed, _ in calls[: SESSIONS // batch]] == [(batch, batch)] * (
        SESSIONS // batch
    )
    assert sum(closed for _, closed, _ in calls) == SESSIONS
