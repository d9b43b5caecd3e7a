"""Due sessions close a batch at a time between event-loop turns: a few while the loop has no
backlog (acknowledgements wait behind no long turn), more while requests wait to be
assembled (throughput is then the bound)."""

from __future__ import annotations

import asyncio
import contextlib

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import parse
from collector.otlp.received import Received, Spooled
from collector.service import Chain
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


async def closing_limits(waiting: int) -> list[tuple[int | None, int]]:
    """(limit, closed) of each ``close_due`` call the ticker makes to close ``SESSIONS`` due
    sessions while ``waiting`` requests wait to be assembled."""
    chain = Chain(
        parse({"sessions": {"idle_timeout": "10s", "check_interval": "0.01s"}}), store=memory_store()
    )
    stage = chain.sessions_stage
    now = [0.0]
    stage.assembler._clock = lambda: now[0]
    await chain.consume(Received("traces", sessions_request(SESSIONS), "test"))
    await stage.settle()
    assert stage.assembler.open_count == SESSIONS
    placeholder = Spooled(Received("traces", ExportTraceServiceRequest(), "test"), 0)
    stage._pending.extend([placeholder] * waiting)  # not woken: they stay waiting
    calls: list[tuple[int | None, int]] = []
    close_due = stage.assembler.close_due

    def recording(limit: int | None = None) -> int:
        closed = close_due(limit)
        calls.append((limit, closed))
        return closed

    stage.assembler.close_due = recording  # type: ignore[method-assign]
    now[0] = 100.0  # every session idle past its timeout
    stage.start()
    try:
        async with asyncio.timeout(10):
            while stage.assembler.open_count:
                await asyncio.sleep(0.01)
    finally:
        assert stage._ticker is not None
        stage._ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stage._ticker
        stage._pending.clear()  # the placeholders are no requests
        await chain.shutdown(5)
    return calls


async def test_without_a_backlog_due_sessions_close_a_few_at_a_time() -> None:
    calls = await closing_limits(waiting=0)
    batch = close_batch(0)
    assert calls[: SESSIONS // batch] == [(batch, batch)] * (SESSIONS // batch)
    assert sum(closed for _, closed in calls) == SESSIONS


async def test_with_a_backlog_due_sessions_close_in_larger_batches() -> None:
    calls = await closing_limits(waiting=20)
    batch = close_batch(20)
    assert batch > close_batch(0)
    assert calls[: SESSIONS // batch] == [(batch, batch)] * (SESSIONS // batch)
    assert sum(closed for _, closed in calls) == SESSIONS
