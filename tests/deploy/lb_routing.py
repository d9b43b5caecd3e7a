"""Traffic shapes for tests in front of the OpenTelemetry Collector's loadbalancing exporter
(``routing_key: attributes``, ``routing_attributes: [session.id]``): how it splits a batch
(per trace), and which recorded traces it cannot route whole, so that a test can leave them
out and say why.  The exporter itself is never imitated here: tests/deploy/test_otelcol.py
and test_multi_replica.py run the real one (deploy/otelcol).  It keys each trace of a batch
by the routing attribute on the resource, else the first scope, else the trace's first span
in that batch; an earlier Python port of its hash ring agreed with the real exporter
(contrib v0.161.0: 131,071 positions, 200 a backend) on 34 of 107 sessions and was removed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

from collector.otlp.views import value_of


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def split_traces(request: ExportTraceServiceRequest) -> list[ExportTraceServiceRequest]:
    """One request per trace id, keeping each span's resource and scope (SplitTraces)."""
    out: OrderedDict[bytes, ExportTraceServiceRequest] = OrderedDict()
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                part = out.setdefault(span.trace_id, ExportTraceServiceRequest())
                target = None
                for existing in part.resource_spans:
                    if existing.resource == rs.resource:
                        target = existing
                if target is None:
                    target = part.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)
                scope = None
                for existing_scope in target.scope_spans:
                    if existing_scope.scope == ss.scope:
                        scope = existing_scope
                if scope is None:
                    scope = target.scope_spans.add(scope=ss.scope, schema_url=ss.schema_url)
                scope.spans.append(span)
    return list(out.values())


def _keep_spans(request: ExportTraceServiceRequest, keep: Callable[[ResourceSpans, Span], bool]) -> ExportTraceServiceRequest:
    """A copy of ``request`` holding only the spans ``keep`` accepts."""
    out = ExportTraceServiceRequest()
    out.CopyFrom(request)
    for rs in out.resource_spans:
        for ss in rs.scope_spans:
            kept = [span for span in ss.spans if keep(rs, span)]
            del ss.spans[:]
            ss.spans.extend(kept)
    return out


def _span_keys(
    requests: list[ExportTraceServiceRequest], attribute: str
) -> Iterator[tuple[bytes, AnyValue | None, AnyValue | None]]:
    """(trace id, the span's own ``attribute`` value, its resource's) for every span."""
    for request in requests:
        for rs in request.resource_spans:
            on_resource = next((kv.value for kv in rs.resource.attributes if kv.key == attribute), None)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    own = next((kv.value for kv in span.attributes if kv.key == attribute), None)
                    yield span.trace_id, own, on_resource


def shared_traces(requests: list[ExportTraceServiceRequest], attribute: str = "session.id") -> set[bytes]:
    """The trace ids whose spans, over all ``requests``, name more than one ``attribute`` value."""
    seen: dict[bytes, set[str]] = {}
    for trace, own, _ in _span_keys(requests, attribute):
        if own is not None:
            seen.setdefault(trace, set()).add(_string(value_of(own)))
    return {trace for trace, values in seen.items() if len(values) > 1}


def keyed_traces(requests: list[ExportTraceServiceRequest], attribute: str = "session.id") -> set[bytes]:
    """The trace ids of spans that carry ``attribute`` (on the span or its resource)."""
    return {
        trace for trace, own, on_resource in _span_keys(requests, attribute) if own is not None or on_resource is not None
    }


def scattered_sessions(requests: list[ExportTraceServiceRequest], attribute: str = "session.id") -> set[bytes]:
    """The trace ids of sessions that span several traces while some of their spans carry no
    ``attribute`` (on the span or its resource).  The exporter routes each trace by its first
    span, so such a session's traces may reach different replicas: deploy/kubernetes asks for
    the attribute on every span (a Claude Agent SDK app without ``using_session`` is one)."""
    session_of: dict[bytes, str] = {}
    unkeyed: set[bytes] = set()
    for trace, own, on_resource in _span_keys(requests, attribute):
        value = own if own is not None else on_resource
        if value is None:
            unkeyed.add(trace)
        else:
            session_of.setdefault(trace, _string(value_of(value)))
    traces_of: dict[str, set[bytes]] = {}
    for trace, session in session_of.items():
        traces_of.setdefault(session, set()).add(trace)
    return {trace for traces in traces_of.values() if len(traces) > 1 and traces & unkeyed for trace in traces}


def partly_keyed_traces(requests: list[ExportTraceServiceRequest], attribute: str = "session.id") -> set[bytes]:
    """The trace ids whose spans do not all carry ``attribute`` (on the span or its resource)
    while some do: the exporter keys each batch of such a trace by its first span, so batches
    led by an unkeyed span go to another replica (the OpenTelemetry GenAI instrumentations'
    chat spans under an application span that alone names the session); deploy/kubernetes
    asks for the attribute on every span."""
    keyed: set[bytes] = set()
    unkeyed: set[bytes] = set()
    for trace, own, on_resource in _span_keys(requests, attribute):
        (keyed if own is not None or on_resource is not None else unkeyed).add(trace)
    return keyed & unkeyed


def without_traces(request: ExportTraceServiceRequest, traces: set[bytes]) -> ExportTraceServiceRequest:
    """``request`` without the spans of ``traces``."""
    return _keep_spans(request, lambda rs, span: span.trace_id not in traces)


__all__ = [
    "keyed_traces",
    "partly_keyed_traces",
    "scattered_sessions",
    "shared_traces",
    "split_traces",
    "without_traces",
]
