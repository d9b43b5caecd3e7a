"""One unreadable item costs itself only: a span whose attribute holds 5,000-deep JSON text is
counted and named in its session's coverage, and the other sessions of its request are
evaluated exactly as when they are sent alone."""

from __future__ import annotations

import copy
import json
import logging
import sqlite3
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropic
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from perf.bench import recorded_session
from prometheus_client import generate_latest
from support import FRAMEWORKS, Server, metric_value, trace_requests, wait_for

from collector.config import parse
from collector.otlp.received import Received
from collector.receiver.decode import parse_json
from collector.service import Chain
from collector.testing import RecordingConsumer, memory_store
from evaluators.result import Coverage

DEEP = "[" * 5000 + '{"type": "tool_use", "text": "x"}' + "]" * 5000


def poisoned(n: int, name: str) -> ExportTraceServiceRequest:
    """A recorded session whose every long text attribute is replaced by 5,000-deep JSON."""
    request = recorded_session(n, name)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    if kv.value.HasField("string_value") and len(kv.value.string_value) > 40:
                        kv.value.string_value = DEEP
    return request


def joined(*requests: ExportTraceServiceRequest) -> ExportTraceServiceRequest:
    out = ExportTraceServiceRequest()
    for request in requests:
        out.resource_spans.extend(copy.deepcopy(request.resource_spans))
    return out


async def evaluate(*requests: ExportTraceServiceRequest) -> tuple[dict[str, dict[str, Any]], Chain]:
    chain = Chain(parse({}), store=memory_store())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    for request in requests:
        item = Received("traces", request, "test")
        await chain.consume(item)
        assert item.outcome.rejected == 0
    await chain.sessions_stage.settle()
    await chain.shutdown(5)
    return {
        c.session.session_id: {**c.to_dict(), "results": [r.to_dict() for r in c.results]}
        for c in exported.items
    }, chain


NORMAL = ("alone-a", "alone-b", "alone-c")


async def test_a_5000_deep_span_leaves_the_other_sessions_of_its_request_as_if_sent_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    normal = [recorded_session(i, name) for i, name in enumerate(NORMAL)]
    alone, _ = await evaluate(*normal)
    bad = poisoned(3, "poisoned")
    # The poisoned session in the middle of the request, its spans between the others'.
    with caplog.at_level(logging.WARNING, logger="skillgauge"):
        together, chain = await evaluate(joined(normal[0], bad, normal[1], normal[2]))
    assert sorted(together) == sorted([*NORMAL, "poisoned"])
    assert alone == {name: together[name] for name in NORMAL}
    assert all(record["skill_loads"] or record["spans"] for record in alone.values())

    poison = together["poisoned"]
    unreadable = poison["unreadable"]
    assert unreadable["count"] >= 1 and unreadable["count"] == len(unreadable["items"])
    assert {item["reason"] for item in unreadable["items"]} == {"too_deep"}
    assert all(item["kind"] == "span" and len(item["span_id"]) == 16 for item in unreadable["items"])
    assert poison["spans"] == sum(len(ss.spans) for rs in bad.resource_spans for ss in rs.scope_spans)
    assert all("unreadable" not in together[name] for name in NORMAL)

    metrics = generate_latest(chain.registry).decode()
    assert (
        metric_value(metrics, "skillgauge_unreadable_items_total", signal="traces", reason="too_deep")
        == unreadable["count"]
    )
    lines = [r for r in caplog.records if "unreadable span" in r.getMessage()]
    assert len(lines) == 1 and "session poisoned" in lines[0].getMessage()  # rate-limited: one line


@pytest.mark.parametrize("limit", [1000, 20_000])
@pytest.mark.parametrize(("depth", "unreadable"), [(1000, False), (5000, True)])
async def test_how_deep_a_value_may_nest_is_the_same_at_any_recursion_limit(
    depth: int, unreadable: bool, limit: int
) -> None:
    """The process's recursion limit (another test's, a test runner's) changes nothing: text
    nested 1,000 deep is read and walked, 5,000 deep is one unreadable span, at either limit."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        text = "[" * depth + '{"type": "tool_use", "text": "x"}' + "]" * depth
        request = recorded_session(3, "nested")
        spans = [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        for kv in (kv for span in spans for kv in span.attributes):
            if kv.value.HasField("string_value") and len(kv.value.string_value) > 40:
                kv.value.string_value = text
        together, _ = await evaluate(request)
    finally:
        sys.setrecursionlimit(before)
    record = together["nested"]
    assert record["spans"] == len(spans)
    if unreadable:
        assert record["unreadable"]["count"] >= 1
        assert {item["reason"] for item in record["unreadable"]["items"]} == {"too_deep"}
    else:
        assert "unreadable" not in record


async def test_an_unreadable_log_record_is_counted_and_its_neighbours_taken() -> None:
    path = FRAMEWORKS / "claude_code" / "file_read.logs.jsonl"
    requests = [
        parse_json(ExportLogsServiceRequest, line.encode()) for line in path.read_text().splitlines() if line
    ]
    alone, _ = await evaluate_logs(requests)
    poisoned_requests = copy.deepcopy(requests)
    target = None
    for request in poisoned_requests:
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    for kv in record.attributes:
                        if kv.key == "prompt" and target is None:
                            kv.value.string_value = DEEP
                            target = record.span_id.hex()
    assert target is not None, "the recording has no user prompt record"
    together, chain = await evaluate_logs(poisoned_requests)
    ((name, record),) = together.items()
    assert record["unreadable"]["count"] == 1
    (item,) = record["unreadable"]["items"]
    assert (item["kind"], item["reason"], item["span_id"]) == ("log", "too_deep", target)
    # Every other record was read: the session is the clean recording's, with the loads that
    # its log records settle (the recording's spans are sent first, as Claude Code does).
    assert {k: v for k, v in record.items() if k != "unreadable"} == alone[name]
    assert record["skill_loads"] and record["loads_by_status"]["loaded"]
    metrics = generate_latest(chain.registry).decode()
    assert metric_value(metrics, "skillgauge_unreadable_items_total", signal="logs", reason="too_deep") == 1


async def evaluate_logs(requests: list[ExportLogsServiceRequest]) -> tuple[dict[str, dict[str, Any]], Chain]:
    chain = Chain(parse({}), store=memory_store())
    exported: RecordingConsumer[Coverage] = RecordingConsumer()
    chain.fanout.exporters.append(exported)
    for traces in trace_requests(FRAMEWORKS / "claude_code" / "file_read.traces.jsonl"):
        await chain.consume(Received("traces", traces, "test"))
    await chain.sessions_stage.settle()
    for request in requests:
        item = Received("logs", request, "test")
        await chain.consume(item)
        assert item.outcome.rejected == 0
    await chain.shutdown(5)
    return {c.session.session_id: c.to_dict() for c in exported.items}, chain


def _serve_and_collect(
    tmp: Path, fake: FakeAnthropic, bodies: list[bytes], sessions: int
) -> dict[str, dict[str, Any]]:
    """Post each body to a real serve over OTLP/HTTP; the coverage lines once all are in."""
    tmp.mkdir()
    db = tmp / "data" / "skillgauge.sqlite"
    config = {
        "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"},
        "judge": {"base_url": fake.base_url, "api_key": "test"},
        "evaluators": {"skill_omission": {"sampling": 100}},
    }
    server = Server(tmp, config)
    try:
        for body in bodies:
            request = urllib.request.Request(
                f"{server.http_url}/v1/traces", body, {"Content-Type": "application/x-protobuf"}
            )
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert resp.status == 200
        wait_for(lambda: len(_coverage(db)) == sessions, timeout=60, interval=0.2)
    finally:
        server.stop()
    return _coverage(db)


def _coverage(db: Path) -> dict[str, dict[str, Any]]:
    if not db.exists():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {s: json.loads(r) for s, r in conn.execute("SELECT session, record FROM coverage")}


def _without_judge_figures(line: dict[str, Any]) -> dict[str, Any]:
    """A coverage line without what differs between two runs of the same judge calls
    (latency, and the cache-dependent token counts) and its close time."""
    return {
        **{k: v for k, v in line.items() if k not in ("judge", "closed_at")},
        "results": [{k: v for k, v in r.items() if k != "judge"} for r in line["results"]],
    }


def test_against_serve_a_5000_deep_span_leaves_three_sessions_evaluated_as_when_sent_alone(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic().start()
    try:
        normal = [recorded_session(i, name) for i, name in enumerate(NORMAL)]
        alone = _serve_and_collect(tmp_path / "alone", fake, [r.SerializeToString() for r in normal], 3)
        calls_alone = len(fake.requests)
        mixed = joined(normal[0], poisoned(3, "poisoned"), normal[1], normal[2])
        together = _serve_and_collect(tmp_path / "together", fake, [mixed.SerializeToString()], 4)
    finally:
        fake.stop()
    assert sorted(alone) == sorted(NORMAL) and calls_alone > 0
    assert {n: _without_judge_figures(together[n]) for n in NORMAL} == {
        n: _without_judge_figures(alone[n]) for n in NORMAL
    }
    assert together["poisoned"]["unreadable"]["count"] >= 1
