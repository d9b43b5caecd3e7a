"""The fields the assembler reads, decoded without the rest of the span.

When detection runs in a worker process, the serving process reads a span only to place it:
its ids, and the few attributes that name a session or end one.  Reading those through the
full OTLP classes costs a Python object per attribute (~4 us for a 20-attribute agent span).
``TraceRequest`` is a narrower schema over the same bytes, with the same field numbers.  Its
attributes are a ``map<string, bytes>`` (``collector.spans.map_entry``): the parser indexes
the keys in C, and ``picked`` looks up the few it wants, decoding only their values.

Where the C scanner is built (``collector/wire_scan.c``), ``KeyScanner`` reads the same
fields straight from the bytes instead, with no object for a span beyond its ids and the
values found; ``TraceRequest`` remains for a pure-Python install and for input the scanner
leaves to protobuf.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from collector.spans import NO_VALUES, UNDECODED, Scanned, decoded_value, decoded_values, map_entry, wire_scan

_F = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_ATTRIBUTES = "attributes"  # a map<string, bytes> wherever it appears
# message -> (field name, number, type, label, message type), numbered as in opentelemetry-proto.
_SCHEMA: dict[str, tuple[tuple[str, int, int, int, str], ...]] = {
    "TraceRequest": (("resource_spans", 1, _F.TYPE_MESSAGE, _MANY, "ResourceSpans"),),
    "ResourceSpans": (
        ("resource", 1, _F.TYPE_MESSAGE, _ONE, "Resource"),
        ("scope_spans", 2, _F.TYPE_MESSAGE, _MANY, "ScopeSpans"),
    ),
    "Resource": ((_ATTRIBUTES, 1, _F.TYPE_MESSAGE, _MANY, ""),),
    "ScopeSpans": (
        ("scope", 1, _F.TYPE_MESSAGE, _ONE, "Scope"),
        ("spans", 2, _F.TYPE_MESSAGE, _MANY, "Span"),
    ),
    "Scope": (("name", 1, _F.TYPE_STRING, _ONE, ""),),
    "Span": (
        ("trace_id", 1, _F.TYPE_BYTES, _ONE, ""),
        ("span_id", 2, _F.TYPE_BYTES, _ONE, ""),
        (_ATTRIBUTES, 9, _F.TYPE_MESSAGE, _MANY, ""),
    ),
}


def _build() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="skillgauge_keys.proto", package="skillgauge.keys", syntax="proto3"
    )
    for name, fields in _SCHEMA.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if field_name == _ATTRIBUTES:
                type_name = f"{name}.{map_entry(message)}"
            if type_name:
                field.type_name = f".skillgauge.keys.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("skillgauge.keys.TraceRequest"))


TraceRequest: Any = _build()


def picked(attributes: Any, wanted: Iterable[str]) -> dict[str, Any]:
    """The values of the ``wanted`` keys in a ``TraceRequest`` attributes map."""
    found: dict[str, Any] = {}
    for key in wanted:
        raw = attributes.get(key)
        if raw is not None:
            found[key] = decoded_value(raw)
    return found


class KeyScanner:
    """The ids of every span of an encoded trace request and the values of the wanted span
    and resource attributes (``collector/wire_scan.pyi``), each value decoded as ``picked``
    decodes it."""

    def __init__(self, span_keys: Iterable[str], resource_keys: Iterable[str]) -> None:
        assert wire_scan is not None, "KeyScanner.available() first"
        self._scanner = wire_scan.Scanner(sorted(span_keys), sorted(resource_keys), (), {})

    @staticmethod
    def available() -> bool:
        return wire_scan is not None

    def scan(self, raw: bytes) -> tuple[list[dict[str, Any]], list[Scanned]] | None:
        """(each ResourceSpans' wanted values, every span as the scanner reads it) or None:
        the input is for protobuf to judge (``TraceRequest``)."""
        found = self._scanner.spans(raw)
        if found is None:
            return None
        resources, spans = found
        return [decoded_values(values) if values else {} for values in resources], spans


def span_values(span: Scanned) -> dict[str, Any]:
    """A scanned span's wanted values, decoded (``NO_VALUES``: none found)."""
    values = span[3]
    if not values:
        return NO_VALUES
    return decoded_values(values) if span[4] & UNDECODED else values
