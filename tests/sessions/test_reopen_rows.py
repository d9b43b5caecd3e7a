"""The store hears of each kept session as it is kept (``Kept._keep``), and its rows are
forgotten when it leaves; what a crash left without its reopenable rows comes back from its
closed rows (``collector.state.revisions.unwritten_kept``)."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import parse
from collector.sessions.assembler import Accepted, Assembler
from collector.state.revisions import unwritten_kept
from collector.state.types import Closed, Recovery, Reopenable


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def span(session: str, trace: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    s = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=trace.to_bytes(16, "big"), span_id=trace.to_bytes(8, "big"), name="agent")
    )
    s.attributes.add(key="session.id").value.string_value = session
    return request


def test_each_kept_session_reaches_the_store_when_kept_and_is_forgotten_when_it_leaves() -> None:
    kept: list[Reopenable] = []
    forgotten: list[str] = []
    clock = Clock()
    config = parse({"sessions": {"idle_timeout": "1s", "reopen_cache": 2}}).sessions
    asm = Assembler(config, lambda s, r: None, clock=clock, on_keep=kept.append, on_forget=forgotten.append)

    def close(*sessions: str) -> None:
        for session in sessions:
            for _ in asm.feed(span(session, ord(session[0])), len(kept) + 1, Accepted()):
                pass
        clock.now += 2
        asm.close_due()

    close("a", "b", "c")  # three kept, the cache holds two: "a" leaves
    assert [e.session for e in kept] == ["a", "b", "c"] and forgotten == ["a"]
    close("d")  # "b" leaves the cache
    assert [e.session for e in kept] == ["a", "b", "c", "d"] and forgotten == ["a", "b"]


def test_revisions_kept_after_the_last_checkpoint_come_back_from_their_closed_rows() -> None:
    closed = {
        "kept": [Closed("kept", 1, "idle_timeout", 3, 5, ("ab" * 16,))],
        "cut": [Closed("cut", 1, "max_spans", 6, 6, ())],  # starts afresh: not reopenable
        "unjudged": [Closed("unjudged", 1, "idle_timeout", 7, 7, ())],  # not evaluated yet
        "written": [Closed("written", 2, "end_attribute", 8, 9, ())],  # its row is already there
        "cd" * 16: [Closed("cd" * 16, 1, "idle_timeout", 10, 10, ("cd" * 16,))],  # named by its trace
    }
    evaluated = {("kept", 1), ("cut", 1), ("written", 2), ("cd" * 16, 1)}
    rows = [Reopenable("written", 2, 8, (8, 9), (), 2)]
    recovery = Recovery(closed=closed, evaluated=evaluated, reopenable=rows)
    assert unwritten_kept(recovery) == [Reopenable("kept", 1, 3, (3, 4, 5), ("ab" * 16,), 0)]


def test_sessions_kept_as_ids_are_held_to_the_cache_with_their_traces() -> None:
    kept: list[Reopenable] = []
    clock = Clock()
    config = parse({"sessions": {"idle_timeout": "1s", "reopen_cache": 2}}).sessions
    asm = Assembler(config, lambda s, r: None, clock=clock, on_keep=kept.append, rebuild_kept=True)
    for n, session in enumerate("abcde"):
        for _ in asm.feed(span(session, n + 1), n + 1, Accepted()):
            pass
        clock.now += 2
        asm.close_due()
    assert len(kept) == 5 and asm.recent_bytes == 0  # no evidence held
    assert sorted(asm._dormant) == ["d", "e"]
    assert sorted(asm._dormant_traces.values()) == ["d", "e"]  # the evicted ones' traces went too
    assert sorted(asm._dormant_ids) == ["d", "e"]  # nor are their ids held


def test_revisions_loaded_at_a_restart_leave_the_cache_with_their_traces() -> None:
    clock = Clock()
    config = parse({"sessions": {"idle_timeout": "1s", "reopen_cache": 2}}).sessions
    asm = Assembler(config, lambda s, r: None, clock=clock, rebuild_kept=True)
    asm.load_dormant(
        [
            Reopenable("x", 1, 1, (1,), ("0a" * 16,), 1),
            Reopenable("y", 1, 2, (2,), ("0b" * 16,), 1),
            # its newer revision: the older one's trace still leads to it
            Reopenable("y", 2, 2, (2, 3), ("0c" * 16,), 2),
        ]
    )
    assert asm._dormant_traces == {b"\x0a" * 16: "x", b"\x0b" * 16: "y", b"\x0c" * 16: "y"}
    for n, session in enumerate("ab"):
        for _ in asm.feed(span(session, n + 1), n + 10, Accepted()):
            pass
        clock.now += 2
        asm.close_due()
    assert sorted(asm._dormant) == ["a", "b"]  # the loaded ones went first, each with its traces
    assert sorted(asm._dormant_traces.values()) == ["a", "b"] and sorted(asm._dormant_ids) == ["a", "b"]
