"""The OpenTelemetry Collector loadbalancing exporter's routing, re-implemented for tests.

What it does (exporter/loadbalancingexporter in opentelemetry-collector-contrib, as read in
consistent_hashing.go, trace_exporter.go and attribute_routing.go of its current main):

* With ``routing_key: attributes`` a batch is first split per trace (``batchpersignal.
  SplitTraces``: one ptrace.Traces per trace id, keeping resource and scope).
* For each such trace batch and each routing attribute, the value is taken from the
  resource, else the first scope's attributes, else the **first span** of the trace; the
  key is the concatenation of ``"<name>=<value>|"`` (``"<name>=|"`` when absent).
* The key's CRC-32 (IEEE) modulo 36000 is a position on a ring.  Each endpoint owns 100
  positions: CRC-32 of the endpoint string followed by the point index as a little-endian
  uint32, modulo 36000; a taken position is probed forward (+1, up to 10 times), else
  skipped.  Endpoints are placed in the resolver's (sorted) order.
* The backend is the first ring item at or after the key's position, wrapping to the first.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from collector.otlp.views import value_of

MAX_POSITIONS = 36000
WEIGHT = 100
PROBE_LIMIT = 10


class HashRing:
    def __init__(self, endpoints: list[str]) -> None:
        taken: dict[int, str] = {}
        for endpoint in sorted(endpoints):
            for i in range(WEIGHT):
                pos = zlib.crc32(endpoint.encode() + struct.pack("<I", i)) % MAX_POSITIONS
                probed = 0
                while pos in taken and probed < PROBE_LIMIT:
                    pos, probed = (pos + 1) % MAX_POSITIONS, probed + 1
                if probed >= PROBE_LIMIT:
                    continue
                taken[pos] = endpoint
        self._positions = sorted(taken)
        self._endpoints = [taken[p] for p in self._positions]

    def endpoint_for(self, key: bytes) -> str:
        pos = zlib.crc32(key) % MAX_POSITIONS
        idx = bisect.bisect_left(self._positions, pos)
        return self._endpoints[idx % len(self._endpoints)]


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def routing_key(rs: ResourceSpans, attributes: list[str]) -> str:
    resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
    scope = {kv.key: value_of(kv.value) for kv in rs.scope_spans[0].scope.attributes}
    first = {kv.key: value_of(kv.value) for kv in rs.scope_spans[0].spans[0].attributes}
    key = ""
    for name in attributes:
        for source in (resource, scope, first):
            if name in source:
                key += f"{name}={_string(source[name])}|"
                break
        else:
            key += f"{name}=|"
    return key


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


def drop_unkeyed_spans(request: ExportTraceServiceRequest, service: str, attribute: str) -> ExportTraceServiceRequest:
    """``request`` without the spans of resources named ``service`` that lack ``attribute``:
    the filter processor's ``traces.span`` condition
    ``resource.attributes["service.name"] == "<service>" and attributes["<attribute>"] == nil``."""

    def keep(rs: ResourceSpans, span: Span) -> bool:
        named = any(kv.key == "service.name" and value_of(kv.value) == service for kv in rs.resource.attributes)
        return not named or any(kv.key == attribute for kv in span.attributes)

    return _keep_spans(request, keep)


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


def routed_apart(requests: list[ExportTraceServiceRequest], attributes: list[str]) -> set[bytes]:
    """The trace ids whose parts, in different requests, the exporter routes by different
    keys: a trace whose spans do not all carry the routing attribute, sent in several batches
    (the OpenTelemetry GenAI instrumentation's chat spans under an application span that alone
    names the session).  Its parts may reach different replicas; deploy/kubernetes asks for
    the attribute on every span."""
    keys: dict[bytes, set[str]] = {}
    for request in requests:
        for part in split_traces(request):
            trace = part.resource_spans[0].scope_spans[0].spans[0].trace_id
            keys.setdefault(trace, set()).update(routing_key(rs, attributes) for rs in part.resource_spans)
    return {trace for trace, found in keys.items() if len(found) > 1}


def without_traces(request: ExportTraceServiceRequest, traces: set[bytes]) -> ExportTraceServiceRequest:
    """``request`` without the spans of ``traces``."""
    return _keep_spans(request, lambda rs, span: span.trace_id not in traces)


def route(
    request: ExportTraceServiceRequest, ring: HashRing, attributes: list[str]
) -> list[tuple[str, ExportTraceServiceRequest]]:
    """(endpoint, per-trace request) pairs, as the exporter would send them."""
    routed = []
    for part in split_traces(request):
        keys = {routing_key(rs, attributes) for rs in part.resource_spans}
        for key in keys:
            routed.append((ring.endpoint_for(key.encode()), part))
    return routed


__all__ = [
    "HashRing",
    "ScopeSpans",
    "drop_unkeyed_spans",
    "keyed_traces",
    "route",
    "routed_apart",
    "routing_key",
    "scattered_sessions",
    "shared_traces",
    "split_traces",
    "without_traces",
]
