"""A span whose trace is bound to its session alone joins it without the general binding
(``Assembler._bound``): every recording assembles to the same sessions, the same close
reasons and the same duplicates with it and without it, in the order recorded, in reverse
(children and parents swapped across requests), and with every request sent twice, for the
default tenant and another."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import recorded_trace_requests

from collector.config import parse
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session


def _assembled(
    requests: list[tuple[ExportTraceServiceRequest, bytes]], tenant: str
) -> tuple[list[Session], dict[str, int], dict[str, int], int]:
    closed: list[Session] = []
    assembler = Assembler(parse({}).sessions, lambda session, _reason: closed.append(session))
    accepted = 0
    for n, (request, body) in enumerate(requests, 1):
        accepted += assembler.add_spans(request, n, raw=body, tenant=tenant).accepted
    assembler.close_all()
    order = sorted(closed, key=lambda s: (s.key, s.revision))
    return order, dict(assembler.duplicates), dict(assembler.closed_by_reason), accepted


@pytest.mark.parametrize("tenant", ["", "acme"])
def test_every_recording_assembles_alike_with_and_without_the_bound_session(
    monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    recorded = recorded_trace_requests()
    orders = {
        "recorded": recorded,
        "reversed": recorded[::-1],
        "each twice": [request for request in recorded for _ in range(2)],
        "all twice": recorded + recorded,
    }
    taken = {"bound": 0}
    bound = Assembler._bound

    def counted(self: Assembler, key: str | None, trace: bytes, ident: bytes) -> object:
        found = bound(self, key, trace, ident)
        taken["bound"] += found is not None
        return found

    monkeypatch.setattr(Assembler, "_bound", counted)
    fast = {name: _assembled(requests, tenant) for name, requests in orders.items()}
    assert taken["bound"] > 1000  # most spans join the session their trace is bound to
    assert fast["each twice"][1].get("traces", 0) > 1000  # re-sent spans are found by it too
    monkeypatch.setattr(Assembler, "_bound", lambda self, key, trace, ident: None)
    for name, requests in orders.items():
        assert _assembled(requests, tenant) == fast[name], name
