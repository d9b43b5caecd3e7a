"""The chain's shape: stages linked by ``Consumer``s, built by ``service.Chain``, safe to shut
down unstarted; the chain's errors answered by the receivers alone."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import generate_latest
from support import FRAMEWORKS, trace_requests

from collector.component import Permanent, Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.receiver.errors import answer, sorted_error
from collector.service import Chain
from collector.testing import RecordingConsumer, memory_store
from evaluators.evidence import MAX_CATALOG_ENTRIES, MAX_DESCRIPTION_CHARS, Catalog, CatalogEntry
from evaluators.result import Coverage


async def test_a_request_flows_through_every_stage_to_the_exporters() -> None:
    chain = Chain(parse({}), store=memory_store())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    item = Received("traces", request, "test")
    await chain.consume(item)
    assert item.outcome.accepted == sum(
        len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans
    )
    await chain.sessions_stage.settle()
    assert chain.open_count() == 1 and not exported.items
    await chain.shutdown(5)
    (coverage,) = exported.items
    assert coverage.session.close_reason == "shutdown" and coverage.session.skill_loads
    assert exported.shutdowns == 1


async def test_shutdown_is_safe_without_start_or_any_item() -> None:
    chain = Chain(parse({}), store=memory_store())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    await chain.shutdown(1)
    assert exported.items == [] and exported.shutdowns == 1


async def test_a_bound_reached_is_retryable_and_takes_nothing() -> None:
    chain = Chain(parse({"sessions": {"max_open": 1}}), store=memory_store())
    (first,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    (second,) = trace_requests(FRAMEWORKS / "strands" / "no_skill_latest.traces.jsonl")
    await chain.consume(Received("traces", first, "test"))
    await chain.sessions_stage.settle()
    with pytest.raises(Retryable):
        await chain.consume(Received("traces", second, "test"))
    assert chain.open_count() == 1
    await chain.shutdown(5)


def _many_sessions(count: int, keyless: int = 0, first: int = 0) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(first, first + count):
        span = spans.add(trace_id=(i + 1).to_bytes(16, "big"), span_id=b"\x01" * 8, name="chat")
        span.attributes.add(key="session.id").value.string_value = f"s-{i}"
    for i in range(keyless):  # no key: each trace is its own (provisional) session
        spans.add(trace_id=(first + count + i + 1).to_bytes(16, "big"), span_id=b"\x02" * 8, name="tool")
    return request


def _queue_chain(max_pending: int, pending_wait: str = "60s") -> Chain:
    """A chain in memory whose ``sessions.max_pending_requests`` is ``max_pending``."""
    return Chain(
        parse(
            {
                "sessions": {
                    "max_pending_requests": max_pending,
                    "pending_wait": pending_wait,
                    "idle_timeout": "1h",
                }
            }
        ),
        store=memory_store(),
    )


async def _two_queued() -> Chain:
    """A chain whose queue (``max_pending_requests: 2``) holds two requests, each assembled
    in several slices."""
    chain = _queue_chain(2)
    for first in (0, 3000):
        await chain.consume(Received("traces", _many_sessions(3000, first=first), "test"))
    return chain


async def test_at_a_full_queue_a_request_waits_for_room_instead_of_being_refused() -> None:
    """``sessions.max_pending_requests`` reached: admission waits (up to
    ``sessions.pending_wait``) for the assembler to take a request, as behind a Collector
    queue that blocks on overflow.  At most that many callers wait; one more is refused at
    once."""
    chain = _queue_chain(1)
    await chain.consume(Received("traces", _many_sessions(3000), "test"))  # assembled in slices
    with pytest.raises(Retryable, match=r"sessions\.max_pending_requests"):
        chain.spool.admit()  # the bound is reached
    waiting = asyncio.create_task(chain.admit())
    await asyncio.sleep(0)
    chain.sessions_stage.refresh()
    assert b"skillgauge_requests_waiting_for_room 1.0" in generate_latest(chain.registry)
    with pytest.raises(Retryable, match=r"sessions\.max_pending_requests"):
        await chain.admit()  # one caller waits already: the most that may
    await waiting  # not refused: it returns once the request before it is assembled
    assert chain.open_count() == 3000
    chain.sessions_stage.refresh()
    assert b"skillgauge_requests_waiting_for_room 0.0" in generate_latest(chain.registry)
    await chain.shutdown(5)


async def test_callers_waiting_for_room_are_served_in_turn() -> None:
    chain = await _two_queued()
    first = asyncio.create_task(chain.admit())
    await asyncio.sleep(0)
    second = asyncio.create_task(chain.admit())
    await first
    assert not second.done()  # the room the first request left was the first caller's
    await second
    await chain.shutdown(5)


async def test_a_newcomer_waits_behind_callers_already_waiting_and_is_not_left_waiting() -> None:
    chain = await _two_queued()
    served: list[str] = []
    callers = {name: asyncio.create_task(chain.admit()) for name in ("a", "b")}
    for name, caller in callers.items():
        caller.add_done_callback(lambda _, name=name: served.append(name))
    await callers["a"]  # the first request is assembled: there is room for one
    newcomer = asyncio.create_task(chain.admit())
    newcomer.add_done_callback(lambda _: served.append("newcomer"))
    # The room "a" left is not the newcomer's: it waits behind "b", and once the queue is
    # empty it is woken too, not left waiting for a request that never comes.
    await asyncio.wait_for(asyncio.gather(callers["b"], newcomer), 30)
    assert served == ["a", "b", "newcomer"]
    await chain.shutdown(5)


async def test_a_request_admitted_before_its_body_was_read_waits_if_the_queue_filled_meanwhile() -> None:
    """The receivers admit a request before reading its body (OTLP/HTTP); when the queue is
    full by the time it reaches the spool, it waits there for room too, not refused."""
    chain = _queue_chain(1)
    await chain.admit()
    await chain.consume(Received("traces", _many_sessions(3000), "test"))  # fills the queue meanwhile
    late = Received("traces", _many_sessions(10, first=3000), "test")
    await chain.consume(late)
    assert late.outcome.accepted == 10 and not late.outcome.rejected
    await chain.sessions_stage.settle()
    assert chain.open_count() == 3010
    await chain.shutdown(5)


async def test_with_no_pending_wait_a_full_queue_refuses_at_once() -> None:
    chain = _queue_chain(1, pending_wait="0s")
    await chain.consume(Received("traces", _many_sessions(3000), "test"))
    with pytest.raises(Retryable, match=r"sessions\.max_pending_requests"):
        await chain.admit()
    await chain.shutdown(5)


async def test_one_request_cannot_open_sessions_past_max_open(tmp_path: Path) -> None:
    chain = Chain(
        parse({"sessions": {"max_open": 2000, "idle_timeout": "1h"}, "storage": {"path": str(tmp_path)}})
    )
    small = Received("traces", _many_sessions(10), "test")
    await chain.consume(small)
    await chain.sessions_stage.settle()  # 10 open before the big one
    item = Received("traces", _many_sessions(59_000, keyless=1_000), "test")
    await chain.consume(item)
    assert (item.outcome.accepted, item.outcome.rejected) == (2_000, 58_000)
    assert "past sessions.max_open (2000" in item.outcome.message
    await chain.sessions_stage.settle()
    assert chain.open_count() == 2000  # s-0 .. s-9 came again in the big request: no new session
    text = generate_latest(chain.registry).decode()
    assert 'skillgauge_rejected_items_total{reason="max_open",signal="traces"} 58000.0' in text
    assert "invalid_item" not in text
    # What was spooled is what was kept: a restart replays no rejected span.
    *_, (_, signal, raw, _) = chain.store.requests(0)
    assert signal == "traces"
    assert len(ExportTraceServiceRequest.FromString(raw).resource_spans[0].scope_spans[0].spans) == 2_000
    await chain.shutdown(30)


async def test_a_session_keeps_a_bounded_catalog_and_says_it_was_cut() -> None:
    chain = Chain(
        parse({"sessions": {"max_catalog_entries": 2, "max_skill_body_chars": 1024}}), store=memory_store()
    )
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")  # 3 advertised
    await chain.consume(Received("traces", request, "test"))
    await chain.shutdown(5)
    (coverage,) = exported.items
    catalog = coverage.to_dict()["catalog"]
    assert len(catalog["skills"]) == 2 and catalog["truncated"] is True and catalog["entries_not_kept"] == 1
    assert all(len(load.body or "") < 1024 + 100 for load in coverage.session.skill_loads)
    text = generate_latest(chain.registry).decode()
    assert "skillgauge_sessions_catalog_truncated_total 1.0" in text
    assert "skillgauge_catalog_entries_not_kept_total 1.0" in text


def test_a_catalog_is_bounded_in_entries_names_and_descriptions() -> None:
    catalog = Catalog()
    catalog.advertise([CatalogEntry(f"skill-{i}", "d") for i in range(MAX_CATALOG_ENTRIES + 100)], "test")
    catalog.advertise([CatalogEntry("skill-1", "again")], "test")  # already kept: not counted
    assert len(catalog.skills) == MAX_CATALOG_ENTRIES and catalog.truncated == 100
    small = Catalog()
    small.advertise([CatalogEntry("n" * 20_000, "d"), CatalogEntry("ok", "x" * 50_000)], "test")
    assert list(small.skills) == ["ok"] and len(small.skills["ok"].description) == MAX_DESCRIPTION_CHARS
    assert small.truncated == 2


@pytest.mark.parametrize(
    ("error", "grpc_code", "http_status", "retry_after"),
    [
        (Retryable("full", retry_after=3.0), grpc.StatusCode.UNAVAILABLE, 503, 3.0),
        (Permanent("bad"), grpc.StatusCode.INVALID_ARGUMENT, 400, None),
    ],
)
def test_the_receivers_answer_the_chains_errors(
    error: Exception, grpc_code: grpc.StatusCode, http_status: int, retry_after: float | None
) -> None:
    reply = answer(sorted_error(error))
    assert (reply.grpc_code, reply.http_status, reply.retry_after) == (grpc_code, http_status, retry_after)
    assert reply.message == str(error)


def test_the_installed_packages_are_pure_python() -> None:
    import collector
    import evaluators

    for package in (collector, evaluators):
        root = Path(package.__file__).parent
        native = [p for p in root.rglob("*") if p.suffix in (".so", ".pyd", ".c")]
        assert native == [], native


async def test_a_refused_request_is_logged_with_the_bound_that_refused_it_once_per_30_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chain = Chain(parse({"sessions": {"max_open": 5, "idle_timeout": "1h"}}), store=memory_store())
    await chain.consume(Received("traces", _many_sessions(5), "test"))
    await chain.sessions_stage.settle()
    with caplog.at_level(logging.WARNING, logger="skillgauge"):
        for _ in range(3):
            with pytest.raises(Retryable, match=r"sessions\.max_open"):
                await chain.admit()
    (line,) = [r for r in caplog.records if "refused with backpressure" in r.getMessage()]
    assert line.levelname == "WARNING" and "sessions.max_open" in line.getMessage()
    await chain.shutdown(5)
