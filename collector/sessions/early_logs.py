"""Log records that name no session and came before the span they were logged under.

A trace may hold several sessions (``opencode serve`` runs one after another in one trace),
and a log record that names none belongs to the session that takes its span.  Behind an
OpenTelemetry Collector the logs and the traces travel apart, so such a record may arrive
while no session of its trace has taken its span yet, and the session its trace is bound to
then may be another one.  ``EarlyLogs`` holds such records until one of these comes first:

- the span arrives: the records go to the session that took it (``take_span``);
- the session the trace was bound to when a record arrived closes: its records go to it
  first (``take_bound_to``), where they would have gone unheld;
- a bound is hit (``MAX_PER_TRACE`` records of one trace, ``MAX_RECORDS`` or ``MAX_BYTES``
  in all): the oldest go to where they would have gone unheld (``add`` returns them).

Nothing held is ever dropped, and a record is held once: a re-sent copy is recognised
(``holds``).  Pure bookkeeping: the assembler decides what to hold and places what is let go.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.proto.resource.v1.resource_pb2 import Resource

MAX_PER_TRACE = 1_000  # records of one trace held at once
MAX_RECORDS = 20_000  # records held at once, in all
MAX_BYTES = 32 * 1024 * 1024  # their encoded size, in all


@dataclass(slots=True)
class EarlyLog:
    """A held record: its encoded bytes (a copy: the request it came in is not kept alive),
    where it came from, and the session its trace was bound to when it arrived."""

    trace: bytes  # ``scoped`` to its tenant
    span_id: bytes
    ident: bytes  # ``log_digest`` of ``encoded``
    encoded: bytes
    resource: Resource
    scope: str
    request_id: int
    tenant: str
    bound_to: str  # the session key its trace was bound to on arrival
    seq: int = 0  # its place in arrival order (``EarlyLogs.add`` sets it)


class EarlyLogs:
    """Held records by trace and span, in arrival order; bounded (module docstring)."""

    def __init__(
        self, max_per_trace: int = MAX_PER_TRACE, max_records: int = MAX_RECORDS, max_bytes: int = MAX_BYTES
    ) -> None:
        self._max_per_trace = max_per_trace
        self._max_records = max_records
        self.max_bytes = max_bytes
        self._by_trace: dict[bytes, OrderedDict[bytes, EarlyLog]] = {}  # trace -> ident -> record
        self._by_span: dict[tuple[bytes, bytes], list[EarlyLog]] = {}  # (trace, span id) -> records
        self._order: OrderedDict[tuple[bytes, bytes], EarlyLog] = (
            OrderedDict()
        )  # (trace, ident), oldest first
        self._seq = 0
        self.held = 0  # records held now (``len``), read on every span
        self.bytes = 0
        self.held_total = 0  # records ever held
        self.let_go_by_bound = 0  # records let go because a bound was hit

    def __len__(self) -> int:
        return self.held

    def holds(self, trace: bytes, ident: bytes) -> bool:
        records = self._by_trace.get(trace)
        return records is not None and ident in records

    def add(self, record: EarlyLog) -> list[EarlyLog]:
        """Hold ``record``; the records a bound now lets go (oldest first, possibly
        ``record`` itself), for the caller to place as if they had not been held."""
        self._seq += 1
        record.seq = self._seq
        records = self._by_trace.setdefault(record.trace, OrderedDict())
        records[record.ident] = record
        self._by_span.setdefault((record.trace, record.span_id), []).append(record)
        self._order[(record.trace, record.ident)] = record
        self.held = len(self._order)
        self.bytes += len(record.encoded)
        self.held_total += 1
        out: list[EarlyLog] = []
        while len(records) > self._max_per_trace:
            out.append(self._remove(next(iter(records.values()))))
        while len(self._order) > self._max_records or (self.bytes > self.max_bytes and self._order):
            out.append(self._remove(next(iter(self._order.values()))))
        self.let_go_by_bound += len(out)
        return out

    def take_span(self, trace: bytes, span_id: bytes) -> list[EarlyLog]:
        """The records logged under span ``span_id`` of ``trace``, in arrival order, let go."""
        records = self._by_span.get((trace, span_id)) if self._order else None
        return [self._remove(r) for r in list(records)] if records is not None else []

    def take_bound_to(self, traces: Iterable[bytes], bound: Callable[[str], bool]) -> list[EarlyLog]:
        """The records of ``traces`` whose ``bound_to`` passes ``bound``, in arrival order,
        let go."""
        out: list[EarlyLog] = []
        for trace in traces:
            records = self._by_trace.get(trace)
            if records is not None:
                out += [r for r in records.values() if bound(r.bound_to)]
        out.sort(key=lambda r: r.seq)
        return [self._remove(r) for r in out]

    def take_all(self) -> list[EarlyLog]:
        """Every record held, oldest first, let go."""
        return [self._remove(r) for r in list(self._order.values())]

    def oldest_request(self) -> int | None:
        """The first spooled request a held record came in (None: none held)."""
        return min((r.request_id for r in self._order.values() if r.request_id), default=None)

    def _remove(self, record: EarlyLog) -> EarlyLog:
        records = self._by_trace[record.trace]
        del records[record.ident]
        if not records:
            del self._by_trace[record.trace]
        del self._order[(record.trace, record.ident)]
        self.held = len(self._order)
        under = self._by_span[(record.trace, record.span_id)]
        under.remove(record)
        if not under:
            del self._by_span[(record.trace, record.span_id)]
        self.bytes -= len(record.encoded)
        return record
