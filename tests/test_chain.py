"""The chain's shape: stages linked by ``Consumer``s, built by ``service.Chain``, safe to shut
down unstarted; the chain's errors answered by the receivers alone."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from support import FRAMEWORKS, trace_requests

from collector.component import Permanent, Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.receiver.errors import answer, sorted_error
from collector.service import Chain
from collector.testing import MemorySpool, RecordingConsumer
from evaluators.result import Coverage


async def test_a_request_flows_through_every_stage_to_the_exporters() -> None:
    chain = Chain(parse({}), store=MemorySpool())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    item = Received("traces", request, "test")
    await chain.consume(item)
    assert item.outcome.accepted == sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    await chain.sessions.settle()
    assert chain.open_count() == 1 and not exported.items
    await chain.shutdown(5)
    (coverage,) = exported.items
    assert coverage.session.close_reason == "shutdown" and coverage.session.skill_loads
    assert exported.shutdowns == 1


async def test_shutdown_is_safe_without_start_or_any_item() -> None:
    chain = Chain(parse({}), store=MemorySpool())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    await chain.shutdown(1)
    assert exported.items == [] and exported.shutdowns == 1


async def test_a_bound_reached_is_retryable_and_takes_nothing() -> None:
    chain = Chain(parse({"sessions": {"max_open": 1}}), store=MemorySpool())
    (first,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    (second,) = trace_requests(FRAMEWORKS / "strands" / "no_skill_latest.traces.jsonl")
    await chain.consume(Received("traces", first, "test"))
    await chain.sessions.settle()
    with pytest.raises(Retryable):
        await chain.consume(Received("traces", second, "test"))
    assert chain.open_count() == 1
    await chain.shutdown(5)


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
