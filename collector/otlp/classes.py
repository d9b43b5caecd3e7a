"""The OTLP request messages the chain parses: OTLP's own, with attributes read as maps.

On the wire an attribute list (``repeated KeyValue``) and a protobuf map of string to
``AnyValue`` are the same bytes: a repeated message of a string key (field 1) and an
``AnyValue`` (field 2).  Declared as a map, protobuf's C decoder files each attribute under
its key as it parses, so that reading a span's keys and looking one up makes no Python
object for each attribute: with the list, each ``KeyValue`` and its key became Python objects
before the first lookup (~0.5 us an attribute, most of what placing a span cost).

``TraceRequest`` and ``LogsRequest`` are OTLP's Export request messages from a descriptor pool
of their own, OTLP's files with the attributes of resources, spans, span events and log
records declared as maps (every other field as OTLP declares it).  What a map changes:

- a key written twice keeps its last value (as ``collector.otlp.views`` read the list);
- the keys come in the map's order, not the order they were written in, and upb seeds its
  hash per process: the same keys come in another order in another process (what depends
  on their order is worked out from them sorted);
- every message of these files is a class of this pool, not OTLP's: test a message's kind by
  its descriptor's full name, not with ``isinstance``, and copy into one with its own class;
- OTLP/JSON writes attributes as a list, which protobuf's JSON reader does not take for a
  map: a JSON request is read into OTLP's own message and converted (``received``).

``received`` converts a request built with OTLP's own classes (tests, JSON) by its bytes.
"""

from __future__ import annotations

from typing import Any, TypeGuard, TypeVar, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

M = TypeVar("M", bound=Message)

_ANY_VALUE = ".opentelemetry.proto.common.v1.AnyValue"
# (file, path of the message within the file) whose ``attributes`` field is read as a map.
_MAPPED: tuple[tuple[Any, tuple[str, ...]], ...] = (
    (resource_pb2, ("Resource",)),
    (trace_pb2, ("Span",)),
    (trace_pb2, ("Span", "Event")),
    (logs_pb2, ("LogRecord",)),
)


def _message(
    file: descriptor_pb2.FileDescriptorProto, path: tuple[str, ...]
) -> descriptor_pb2.DescriptorProto:
    found = next(m for m in file.message_type if m.name == path[0])
    for name in path[1:]:
        found = next(m for m in found.nested_type if m.name == name)
    return found


def _as_map(file: descriptor_pb2.FileDescriptorProto, path: tuple[str, ...]) -> None:
    """Declare ``attributes`` of the message at ``path`` as ``map<string, AnyValue>`` (the
    entry message protoc makes for such a field)."""
    message = _message(file, path)
    field = next(f for f in message.field if f.name == "attributes")
    entry = message.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    entry.field.add(name="key", number=1, label=label, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    entry.field.add(
        name="value",
        number=2,
        label=label,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=_ANY_VALUE,
    )
    field.type_name = "." + ".".join((file.package, *path, entry.name))


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, trace_pb2, logs_pb2, trace_service_pb2, logs_service_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        for owner, path in _MAPPED:
            if owner is module:
                _as_map(file, path)
        pool.Add(file)
    return pool


_POOL = _pool()


def _class(full_name: str) -> type[Message]:
    return cast(type[Message], message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name)))


# Typed as OTLP's own classes: the same fields, but ``attributes`` of the four messages above
# is a map (``collector.otlp.views.Attributes`` reads it as one).
TraceRequest = cast(
    type[trace_service_pb2.ExportTraceServiceRequest],
    _class("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
)
LogsRequest = cast(
    type[logs_service_pb2.ExportLogsServiceRequest],
    _class("opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest"),
)
LogRecord = cast(type[logs_pb2.LogRecord], _class("opentelemetry.proto.logs.v1.LogRecord"))
Span = cast(type[trace_pb2.Span], _class("opentelemetry.proto.trace.v1.Span"))
Resource = cast(type[resource_pb2.Resource], _class("opentelemetry.proto.resource.v1.Resource"))

_OURS: dict[type[Message], type[Message]] = {
    trace_service_pb2.ExportTraceServiceRequest: TraceRequest,
    logs_service_pb2.ExportLogsServiceRequest: LogsRequest,
    logs_pb2.LogRecord: LogRecord,
    trace_pb2.Span: Span,
    resource_pb2.Resource: Resource,
}


def received(message: M) -> M:
    """``message`` as the chain reads it: one of OTLP's own classes (a request built in code,
    or read from OTLP/JSON) converted by its bytes; one of ours as it is."""
    ours = _OURS.get(type(message))
    if ours is None:
        return message
    return cast(M, ours.FromString(message.SerializeToString()))


def is_traces(request: Message) -> TypeGuard[trace_service_pb2.ExportTraceServiceRequest]:
    """Whether ``request`` is an Export trace request (OTLP's class or ours)."""
    return bool(request.DESCRIPTOR.full_name == _TRACES)


def as_traces(request: Message) -> trace_service_pb2.ExportTraceServiceRequest:
    """``request``, an Export trace request (OTLP's class or ours), typed as one."""
    if not is_traces(request):
        raise TypeError(f"not an Export trace request: {request.DESCRIPTOR.full_name}")
    return request


def as_logs(request: Message) -> logs_service_pb2.ExportLogsServiceRequest:
    """``request``, an Export logs request (OTLP's class or ours), typed as one."""
    if request.DESCRIPTOR.full_name != _LOGS:
        raise TypeError(f"not an Export logs request: {request.DESCRIPTOR.full_name}")
    return cast(logs_service_pb2.ExportLogsServiceRequest, request)


_TRACES = trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR.full_name
_LOGS = logs_service_pb2.ExportLogsServiceRequest.DESCRIPTOR.full_name

__all__ = [
    "LogRecord",
    "LogsRequest",
    "Resource",
    "Span",
    "TraceRequest",
    "as_logs",
    "as_traces",
    "is_traces",
    "received",
]
