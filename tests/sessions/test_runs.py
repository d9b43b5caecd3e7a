"""A span that continues a run (the session the last span of its request joined, by the same
key, source and trace) is counted in that session without being placed again
(``Assembler.feed``): every recording assembles to the same sessions, duplicates, close
reasons and acknowledgements with runs and without, in the order recorded, reversed, and
with every request sent twice, for the default tenant and another; and so do requests built
to end a run in each way one ends (a re-sent span, a session closed by its limits, its end
attribute, another trace or key in between)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import assembled, recorded_trace_requests

from collector.sessions import assembler as assembler_module
from collector.sessions.assembler import Assembler


def _counted_joins(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many spans ``Assembler._join`` counts without ``_place`` (a run's)."""
    taken = {"runs": 0, "placed": 0}
    join, place = Assembler._join, Assembler._place

    def joined(self: Assembler, *args: Any) -> Any:
        taken["runs"] += 1
        return join(self, *args)

    def placed(self: Assembler, *args: Any) -> Any:
        taken["placed"] += 1
        session = place(self, *args)
        taken["runs"] -= session is not None  # ``_place`` joins through ``_join`` too
        return session

    monkeypatch.setattr(Assembler, "_join", joined)
    monkeypatch.setattr(Assembler, "_place", placed)
    return taken


@pytest.mark.parametrize("tenant", ["", "acme"])
def test_every_recording_assembles_alike_with_and_without_runs(
    monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    recorded: list[tuple[ExportTraceServiceRequest, bytes | None]] = list(recorded_trace_requests())
    orders = {
        "recorded": recorded,
        "reversed": recorded[::-1],
        "each twice": [request for request in recorded for _ in range(2)],
        "all twice": recorded + recorded,
    }
    taken = _counted_joins(monkeypatch)
    with_runs = {name: assembled(requests, tenant) for name, requests in orders.items()}
    assert taken["runs"] > 2000  # most spans continue a run
    assert taken["placed"] > 1000
    monkeypatch.setattr(assembler_module, "RUNS", False)
    taken["runs"] = 0
    for name, requests in orders.items():
        assert assembled(requests, tenant) == with_runs[name], name
    assert taken["runs"] == 0  # nothing joined without ``_place``


def _request(
    spans: list[tuple[int, int, dict[str, object]]],
) -> tuple[ExportTraceServiceRequest, bytes | None]:
    """One request of (trace, span, attributes) spans, in order, under one resource and scope."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for trace, span, attrs in spans:
        added = scope.spans.add(trace_id=trace.to_bytes(16, "big"), span_id=span.to_bytes(8, "big"), name="x")
        for key, value in attrs.items():
            if isinstance(value, bool):
                added.attributes.add(key=key).value.bool_value = value
            else:
                added.attributes.add(key=key).value.string_value = str(value)
    return request, None


@pytest.mark.parametrize(
    ("spans", "sessions"),
    [
        # a span re-sent within its run, and the run going on after it
        ([(1, n, {"session.id": "s"}) for n in (1, 2, 3, 3, 4, 5)] + [(1, 6, {})], {}),
        # the session closed by its span limit within a run: the next span opens a new revision
        ([(1, n, {"session.id": "s"}) for n in range(1, 8)], {"max_spans": 3}),
        # ... and by its size
        ([(1, n, {"session.id": "s", "pad": "x" * 200}) for n in range(1, 8)], {"max_bytes": 700}),
        # the end attribute on a span within a run
        (
            [
                (1, 1, {"session.id": "s"}),
                (1, 2, {"session.id": "s"}),
                (1, 3, {"session.id": "s", "skillgauge.session.end": True}),
                (1, 4, {"session.id": "s"}),
            ],
            {},
        ),
        # spans without a key, then a key naming the trace's session, another trace, another key
        (
            [
                (1, 1, {}),
                (1, 2, {}),
                (1, 3, {"session.id": "s"}),
                (1, 4, {}),
                (2, 5, {"session.id": "s"}),
                (2, 6, {"session.id": "t"}),
                (2, 7, {"session.id": "t"}),
                (1, 8, {"session.id": "s"}),
                (2, 9, {}),
            ],
            {},
        ),
        # a span re-sent of another session between two spans of a run
        (
            [
                (2, 3, {"session.id": "t"}),
                (2, 4, {"session.id": "t"}),
                (1, 1, {"session.id": "s"}),
                (1, 2, {"session.id": "s"}),
                (2, 3, {"session.id": "t"}),
                (1, 5, {"session.id": "s"}),
            ],
            {},
        ),
        # a skill named on a later span of a provisional session
        ([(1, 1, {}), (1, 2, {}), (1, 3, {}), (1, 4, {"gen_ai.skill.name": "pdf"}), (1, 5, {})], {}),
    ],
)
def test_a_run_ends_as_placing_each_span_would_end_it(
    monkeypatch: pytest.MonkeyPatch, spans: list[tuple[int, int, dict[str, object]]], sessions: dict[str, int]
) -> None:
    requests = [_request(spans), _request(spans[::-1])]
    with_runs = assembled(requests, "", **sessions)
    monkeypatch.setattr(assembler_module, "RUNS", False)
    assert assembled(requests, "", **sessions) == with_runs
