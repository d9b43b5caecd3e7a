"""With a durable spool, a kept (closed) session is held as its request ids only, and a late
span rebuilds it from its spooled requests, as a restart does: the next revision carries every
span of both halves, as if they had come at once, and a re-sent span is still known as taken."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.otlp.received import Received
from collector.service import Chain
from collector.testing import RecordingConsumer, memory_store
from evaluators.result import Coverage

SESSION = "strands-right_skill-0001"


def part(request: ExportTraceServiceRequest, keep: slice) -> ExportTraceServiceRequest:
    """``request`` with only the spans ``keep`` picks of its spans in order."""
    part = ExportTraceServiceRequest()
    part.CopyFrom(request)
    ordinals = iter(range(10_000))
    for resource_spans in part.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            spans = list(scope_spans.spans)
            del scope_spans.spans[:]
            for span in spans:
                if next(ordinals) in range(10_000)[keep]:
                    scope_spans.spans.add().CopyFrom(span)
    return part


async def run(chain: Chain, *requests: ExportTraceServiceRequest) -> RecordingConsumer[Coverage]:
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    for request in requests:
        await chain.consume(Received("traces", request, "test"))
        await chain.sessions_stage.settle()
    return exported


async def test_a_late_span_rebuilds_a_kept_session_from_its_spooled_requests(tmp_path: Path) -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    whole = Chain(parse({}), store=memory_store())
    reference = await run(whole, request)
    await whole.shutdown(5)
    (wanted,) = reference.items

    chain = Chain(parse({"storage": {"path": str(tmp_path)}}))
    stage = chain.sessions_stage
    exported = await run(chain, part(request, slice(0, 2)))  # the skill load is in this half
    await stage.close(SESSION, "idle_timeout")
    await chain.drain(10)
    (first,) = exported.items
    assert (first.session.revision, first.session.span_count) == (1, 2)
    # Kept as what reopening needs: no evidence is held for it.
    assert stage.assembler.has_dormant and stage.assembler.recent_bytes == 0

    resent = Received("traces", part(request, slice(0, 1)), "test")
    await chain.consume(resent)
    await stage.settle()
    assert resent.outcome.accepted == 1 and chain.open_count() == 0  # taken already: no reopening
    assert stage.assembler.duplicates == {"traces": 1}

    await chain.consume(Received("traces", part(request, slice(2, None)), "test"))
    await stage.settle()
    await chain.shutdown(5)
    _, second = exported.items
    assert (second.session.revision, second.session.span_count) == (2, spans)
    assert [(load.skill, load.status) for load in second.session.skill_loads] == [
        (load.skill, load.status) for load in wanted.session.skill_loads
    ]
    assert second.session.skill_loads and second.session.framework == wanted.session.framework
    assert second.session.catalog.skills.keys() == wanted.session.catalog.skills.keys()


async def test_a_rebuilt_session_takes_none_of_the_other_sessions_spooled_with_it(tmp_path: Path) -> None:
    """Requests that carry spans of other sessions too (as a batching exporter sends them):
    the rebuilt revision holds its own spans, each once, and none of theirs."""
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    (other,) = trace_requests(FRAMEWORKS / "strands" / "denied.traces.jsonl")
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    others = sum(len(ss.spans) for rs in other.resource_spans for ss in rs.scope_spans)
    mixed = part(request, slice(0, 2))
    mixed.resource_spans.extend(other.resource_spans)  # the other session, whole, in the same request

    chain = Chain(parse({"storage": {"path": str(tmp_path)}}))
    stage = chain.sessions_stage
    exported = await run(chain, mixed)
    await stage.close(SESSION, "idle_timeout")
    await stage.close("strands-denied-0001", "idle_timeout")
    await chain.drain(10)
    assert sorted((c.session.key, c.session.span_count) for c in exported.items) == [
        ("strands-denied-0001", others),
        (SESSION, 2),
    ]
    assert stage.assembler.has_dormant

    await chain.consume(Received("traces", part(request, slice(2, None)), "test"))
    await stage.settle()
    await chain.shutdown(5)
    rebuilt = [c.session for c in exported.items if c.session.revision == 2]
    assert [(s.key, s.span_count) for s in rebuilt] == [(SESSION, spans)]
    assert rebuilt[0].skill_loads
