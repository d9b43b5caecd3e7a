"""Held log records are bounded and let go whole: oldest first at a bound, by span, by the
session their trace was bound to; never lost."""

from __future__ import annotations

from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from collector.sessions.early_logs import EarlyLog, EarlyLogs


def record(trace: bytes, span: int, n: int, bound_to: str = "a", size: int = 10) -> EarlyLog:
    return EarlyLog(
        trace, span.to_bytes(8, "big"), f"{trace.hex()}-{n}".encode(), b"x" * size, Resource(), "s", n, "", bound_to
    )


def idents(records: list[EarlyLog]) -> list[bytes]:
    return [r.ident for r in records]


def test_a_trace_over_its_bound_lets_its_oldest_go_and_keeps_the_rest() -> None:
    held = EarlyLogs(max_per_trace=2)
    t, u = b"t" * 16, b"u" * 16
    first, second, third, other = record(t, 1, 1), record(t, 2, 2), record(t, 3, 3), record(u, 1, 4)
    assert held.add(first) == [] and held.add(other) == [] and held.add(second) == []
    assert idents(held.add(third)) == [first.ident]
    assert len(held) == 3 and held.let_go_by_bound == 1 and held.held_total == 4
    assert not held.holds(t, first.ident) and held.holds(t, third.ident) and held.holds(u, other.ident)
    assert held.oldest_request() == 2


def test_the_bounds_in_all_count_records_and_bytes() -> None:
    by_count = EarlyLogs(max_records=2)
    a, b, c = (record(bytes([n]) * 16, 1, n) for n in (1, 2, 3))
    by_count.add(a)
    by_count.add(b)
    assert idents(by_count.add(c)) == [a.ident]
    by_bytes = EarlyLogs(max_bytes=25)
    by_bytes.add(record(b"t" * 16, 1, 1, size=10))
    by_bytes.add(record(b"t" * 16, 1, 2, size=10))
    assert len(by_bytes.add(record(b"t" * 16, 1, 3, size=10))) == 1 and by_bytes.bytes == 20


def test_records_go_with_their_span_or_their_binding_in_arrival_order() -> None:
    held = EarlyLogs()
    t, u = b"t" * 16, b"u" * 16
    rs = [record(t, 1, 1, "a"), record(t, 2, 2, "b"), record(u, 1, 3, "a"), record(t, 1, 4, "a"), record(t, 3, 5, "a")]
    for r in rs:
        held.add(r)
    assert idents(held.take_span(t, (1).to_bytes(8, "big"))) == [rs[0].ident, rs[3].ident]
    assert held.take_span(t, (1).to_bytes(8, "big")) == []
    assert idents(held.take_bound_to({t, u}, lambda key: key == "a")) == [rs[2].ident, rs[4].ident]
    assert idents(held.take_all()) == [rs[1].ident]
    assert len(held) == 0 and held.bytes == 0 and held.oldest_request() is None
