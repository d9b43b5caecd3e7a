"""A provisional session folded into a session that its key starts (``Binding._session_for``)
gives that session its evidence (``Binding._start``'s ``taken``) rather than a new one that
takes over the provisional one's containers (``SessionEvidence.absorb``): every recording
assembles to the same sessions either way, in the order recorded and reversed, for
the default tenant and another; a session that was open already, or that reopens a closed
revision, still absorbs."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import assembled, recorded_trace_requests

from collector.config import parse
from collector.detect.session import SessionEvidence
from collector.sessions import binding
from collector.sessions.assembler import Assembler
from collector.sessions.binding import Binding


def _counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many evidences are made and how many folds absorb."""
    counts = {"made": 0, "absorbed": 0}
    absorb = SessionEvidence.absorb

    class Counted(SessionEvidence):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            counts["made"] += 1
            super().__init__(*args)

    def absorbing(self: SessionEvidence, other: SessionEvidence) -> None:
        counts["absorbed"] += 1
        absorb(self, other)

    monkeypatch.setattr(binding, "SessionEvidence", Counted)
    monkeypatch.setattr(SessionEvidence, "absorb", absorbing)
    return counts


def _request(spans: list[tuple[int, int, str | None]]) -> tuple[ExportTraceServiceRequest, bytes | None]:
    """One request of (trace, span, session id or None) spans, in order."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for trace, span, session in spans:
        added = scope.spans.add(trace_id=trace.to_bytes(16, "big"), span_id=span.to_bytes(8, "big"), name="x")
        if session is not None:
            added.attributes.add(key="session.id").value.string_value = session
    return request, None


@pytest.mark.parametrize("tenant", ["", "acme"])
def test_every_recording_assembles_alike_whether_a_fold_takes_the_evidence_or_absorbs_it(
    monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    recorded: list[tuple[ExportTraceServiceRequest, bytes | None]] = list(recorded_trace_requests())
    orders = {"recorded": recorded, "reversed": recorded[::-1]}
    counts = _counted(monkeypatch)
    taking = {name: assembled(requests, tenant) for name, requests in orders.items()}
    made, absorbed = counts["made"], counts["absorbed"]
    start = Binding._start

    def absorbing_start(
        self: Binding, *args: Any, taken: SessionEvidence | None = None, **kwargs: Any
    ) -> Any:
        return start(self, *args, **kwargs)  # without ``taken``: a new evidence each time

    monkeypatch.setattr(Binding, "_start", absorbing_start)
    counts.update(made=0, absorbed=0)
    for name, requests in orders.items():
        assert assembled(requests, tenant) == taking[name], name
    folds_taken = counts["absorbed"] - absorbed
    assert folds_taken > 10  # the recordings fold provisional sessions into new ones
    assert counts["made"] - made == folds_taken  # each of them made an evidence more


def test_a_new_session_takes_the_evidence_of_the_provisional_one_it_folds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _counted(monkeypatch)
    assembler = Assembler(parse({}).sessions, lambda _session, _reason: None)
    # A child without the key before its parent with it: a provisional session, folded.
    assembler.add_spans(_request([(1, 2, None), (1, 1, "s")])[0], 1)
    (session,) = assembler.open_sessions()
    assert (session.key, session.spans, session.evidence.span_count) == ("s", 2, 2)
    assert counts == {"made": 1, "absorbed": 0}


def test_a_session_open_already_absorbs_the_provisional_one(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _counted(monkeypatch)
    assembler = Assembler(parse({}).sessions, lambda _session, _reason: None)
    assembler.add_spans(_request([(1, 1, "s")])[0], 1)
    # Another trace of the same session: its child comes first, unkeyed.
    assembler.add_spans(_request([(2, 2, None), (2, 1, "s")])[0], 2)
    (session,) = assembler.open_sessions()
    assert (session.key, session.spans, session.evidence.span_count) == ("s", 3, 3)
    assert counts == {"made": 2, "absorbed": 1}


def test_a_reopened_session_absorbs_the_provisional_one(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _counted(monkeypatch)
    now = [1000.0]
    config = parse({"sessions": {"idle_timeout": "10s"}}).sessions
    assembler = Assembler(config, lambda _session, _reason: None, clock=lambda: now[0])
    assembler.add_spans(_request([(1, 1, "s")])[0], 1)
    now[0] += 11
    assert assembler.close_due() == 1  # kept whole: a late span reopens it with its evidence
    assembler.add_spans(_request([(2, 2, None), (2, 1, "s")])[0], 2)
    (session,) = assembler.open_sessions()
    assert (session.key, session.revision, session.evidence.span_count) == ("s", 2, 3)
    assert counts == {"made": 2, "absorbed": 1}


def test_a_session_after_a_revision_not_kept_takes_the_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _counted(monkeypatch)
    assembler = Assembler(parse({}).sessions, lambda _session, _reason: None)
    assembler.add_spans(_request([(1, 1, "s")])[0], 1)
    assembler.close_all()  # shutdown: not kept for reopening
    assembler.add_spans(_request([(2, 2, None), (2, 1, "s")])[0], 2)
    (session,) = assembler.open_sessions()
    assert (session.key, session.revision, session.evidence.span_count) == ("s", 2, 2)
    assert counts == {"made": 2, "absorbed": 0}
