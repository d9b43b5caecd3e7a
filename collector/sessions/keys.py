"""The fields the assembler reads, decoded without the rest of the span.

When detection runs in a worker process, the serving process reads a span only to place it:
its ids, and the few attributes that name a session or end one.  Reading those through the
full OTLP classes costs a Python object per attribute (~4 us for a 20-attribute agent span).
``TraceRequest`` is a narrower schema over the same bytes: the same field numbers, with each
attribute kept as its encoded ``KeyValue`` bytes, so ``picked`` can compare a key without
decoding anything else and decode only the attributes it wants.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from collector.spans import value_of

_F = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
# message -> (field name, number, type, label, message type), numbered as in opentelemetry-proto.
_SCHEMA: dict[str, tuple[tuple[str, int, int, int, str], ...]] = {
    "TraceRequest": (("resource_spans", 1, _F.TYPE_MESSAGE, _MANY, "ResourceSpans"),),
    "ResourceSpans": (
        ("resource", 1, _F.TYPE_MESSAGE, _ONE, "Resource"),
        ("scope_spans", 2, _F.TYPE_MESSAGE, _MANY, "ScopeSpans"),
    ),
    "Resource": (("attributes", 1, _F.TYPE_BYTES, _MANY, ""),),
    "ScopeSpans": (
        ("scope", 1, _F.TYPE_MESSAGE, _ONE, "Scope"),
        ("spans", 2, _F.TYPE_MESSAGE, _MANY, "Span"),
    ),
    "Scope": (("name", 1, _F.TYPE_STRING, _ONE, ""),),
    "Span": (
        ("trace_id", 1, _F.TYPE_BYTES, _ONE, ""),
        ("span_id", 2, _F.TYPE_BYTES, _ONE, ""),
        ("attributes", 9, _F.TYPE_BYTES, _MANY, ""),
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
            if type_name:
                field.type_name = f".skillgauge.keys.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("skillgauge.keys.TraceRequest"))


TraceRequest: Any = _build()
MAX_KEY = 127  # a key this long or shorter has a one-byte length, which ``picked`` relies on


def encoded(keys: frozenset[str]) -> frozenset[bytes]:
    if any(len(key.encode()) > MAX_KEY for key in keys):
        raise ValueError(f"attribute keys over {MAX_KEY} bytes are read with the full OTLP classes")
    return frozenset(key.encode() for key in keys)


def picked(kvs: Any, wanted: frozenset[bytes]) -> dict[str, Any]:
    """The values of the ``wanted`` keys among encoded ``KeyValue`` messages."""
    found: dict[str, Any] = {}
    if wanted:
        for kv in kvs:
            # An encoder writes the key (field 1, length-delimited: tag 0x0A) first; a message
            # that does not start with it is decoded whole, so no key is ever missed.
            if kv and kv[0] == 0x0A and kv[2 : 2 + kv[1]] not in wanted:
                continue
            decoded = KeyValue.FromString(kv)
            if decoded.key.encode() in wanted:
                found[decoded.key] = value_of(decoded.value)
    return found
