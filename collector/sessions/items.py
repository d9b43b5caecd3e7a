"""What identifies a span or log record, and whether a span can be used at all.

A span is usable when its trace id is 16 non-zero bytes and its span id 8 non-zero bytes
(``span_problem``); it is identified by (trace id, span id) within its session, a log record
by ``log_id``.  A trace id is bound to a session within its tenant (``scoped``).
``check_spans`` finds what ``Assembler.add_spans`` will accept and reject without assembling
anything; ``checking_spans`` does so pausing now and then, for a caller on the event loop.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Generator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.otlp.received import Accepted
from evaluators.evidence import TENANT_SEPARATOR

ZERO_TRACE = bytes(16)
# How long ``feed`` works before it pauses: what an acknowledgement may wait behind it.  Spans
# cost from ~10 us to milliseconds each (a long history read whole), so the slice is a time,
# not a count.
SLICE_SECONDS = 0.002
# Why a log record with neither a session key nor a trace id is not taken.
UNCORRELATED = "log record with no session key and no trace_id to correlate it"
ZERO_SPAN = bytes(8)


def scoped(tenant: str, trace_id: bytes) -> bytes:
    """A trace id within its tenant: how traces are bound to sessions (and recorded in
    ``Closed.traces``).  The default tenant's are the ids themselves."""
    return tenant.encode() + TENANT_SEPARATOR.encode() + trace_id if tenant and trace_id else trace_id


def span_problem(span: Span) -> str | None:
    """Why a span cannot be used at all, or None."""
    return ids_problem(span.trace_id, span.span_id)


def ids_problem(trace_id: bytes, span_id: bytes) -> str | None:
    """Why a span with these ids cannot be used at all, or None."""
    if len(trace_id) != 16 or trace_id == ZERO_TRACE:
        return "span with an invalid trace_id (need 16 non-zero bytes)"
    if len(span_id) != 8 or span_id == ZERO_SPAN:
        return "span with an invalid span_id (need 8 non-zero bytes)"
    return None


def log_id(record: LogRecord) -> bytes:
    """What identifies a log record within its session.  OTLP gives log records no id, so a
    record is its content: a digest of the record as sent (trace and span id, time, observed
    time, severity, event name, body, attributes; deterministic protobuf encoding).  Two
    records alike in all of these are one record sent twice; a record whose content changed
    on the way (a redaction rule added between the two sends) is a new one."""
    return log_digest(record.SerializeToString(deterministic=True))


def log_digest(encoded: bytes) -> bytes:
    """``log_id`` of a record from its deterministic encoding."""
    return b"L" + hashlib.blake2b(encoded, digest_size=16).digest()


Steps = Generator[None, None, Accepted]  # pauses (yields) now and then; returns the answer


def finish(steps: Steps) -> Accepted:
    """What ``steps`` return, run without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def check_spans(request: ExportTraceServiceRequest) -> Accepted:
    """What ``add_spans`` will accept and reject, found without assembling anything."""
    return finish(checking_spans(request))


def checking_spans(request: ExportTraceServiceRequest, slice_seconds: float = SLICE_SECONDS) -> Steps:
    """``check_spans``, pausing once ``slice_seconds`` have passed since it started or last
    paused, so that a caller on the event loop lets other work (health checks) through."""
    result = Accepted()
    clock = time.perf_counter
    pause_at = clock() + slice_seconds
    for resource_spans in request.resource_spans[:]:  # slices: see ``collector.otlp.views``
        for scope_spans in resource_spans.scope_spans[:]:
            for span in scope_spans.spans[:]:
                if clock() >= pause_at:
                    yield
                    pause_at = clock() + slice_seconds
                problem = span_problem(span)
                if problem is None:
                    result.accepted += 1
                else:
                    result.reject(problem)
    return result
