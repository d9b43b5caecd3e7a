"""Read-only views over OTLP spans and log records, shared by the assembler and detectors.

A view wraps the protobuf message as received and converts an attribute to a Python value
only when somebody asks for it: most attributes of most spans are never read.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

_ERROR = Status.STATUS_CODE_ERROR


def value_of(value: AnyValue) -> Any:
    """An OTLP AnyValue as a plain Python value (str, bool, int, float, bytes, list, dict)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def as_text(value: Any) -> str | None:
    """A value as the text a detector reads: strings as they are, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return json.dumps(value, ensure_ascii=False)


class Attributes:
    """Lazy key lookup over a repeated KeyValue field."""

    __slots__ = ("_index", "_kvs")

    def __init__(self, kvs: Any) -> None:
        self._kvs = kvs
        self._index: dict[str, AnyValue] | None = None

    def _map(self) -> dict[str, AnyValue]:
        if self._index is None:
            self._index = {kv.key: kv.value for kv in self._kvs}
        return self._index

    def __contains__(self, key: str) -> bool:
        return key in self._map()

    def get(self, key: str) -> Any:
        raw = self._map().get(key)
        return None if raw is None else value_of(raw)

    def text(self, key: str) -> str | None:
        return as_text(self.get(key))

    def keys(self) -> Any:
        return self._map().keys()

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        return {k: value_of(v) for k, v in self._map().items() if k.startswith(prefix)}


def attributes_of(kvs: list[KeyValue] | Any) -> Attributes:
    return Attributes(kvs)


class ResourceView:
    """One resource, shared by every span under it."""

    __slots__ = ("attrs",)

    def __init__(self, resource: Resource) -> None:
        self.attrs = Attributes(resource.attributes)


class SpanView:
    __slots__ = ("attrs", "resource", "scope", "span")

    def __init__(self, span: Span, scope: str, resource: ResourceView) -> None:
        self.span = span
        self.scope = scope
        self.resource = resource
        self.attrs = Attributes(span.attributes)

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def is_error(self) -> bool:
        return self.span.status.code == _ERROR

    @property
    def status_message(self) -> str:
        return self.span.status.message


class LogView:
    __slots__ = ("attrs", "record", "resource", "scope")

    def __init__(self, record: LogRecord, scope: str, resource: ResourceView) -> None:
        self.record = record
        self.scope = scope
        self.resource = resource
        self.attrs = Attributes(record.attributes)

    @property
    def event_name(self) -> str:
        # OTLP 1.5+ has a field; older emitters put it in the `event.name` attribute.
        return self.record.event_name or self.attrs.text("event.name") or ""

    @property
    def body(self) -> Any:
        return value_of(self.record.body)
