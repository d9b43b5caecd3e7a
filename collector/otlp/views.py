"""Read-only views over the one decoded form of OTLP: the protobuf messages as received.

The assembler and the detectors read spans and log records only through these views.  A
view reads a repeated field at most once, when somebody first asks for it, and converts a
value to Python only when it is asked for:

- ``Attributes``: a span's, log record's, resource's or span event's attributes, a map as
  ``collector.otlp.classes`` parses them (a key written twice keeps its last value); each
  value becomes a Python value (``value_of``) the first time it is read.
- ``SpanView.events``: the span's events, each with its own ``Attributes``, in span order.
- ``LogView.message_fields``: a log body written ``[message, "<JSON object>"]``, parsed once.
- ``Encoded``: a string value's UTF-8 bytes, for a reader that decodes only part of a long
  text (``Attributes.encoded``); a view of the request as received where ``inplace`` found
  the span's strings in it, else a copy.

A loop over a repeated protobuf field goes over a slice of it (``field[:]``, a list made in
C): a loop over the field itself ends when a read past its end raises ``IndexError``, whose
message upb formats and the loop drops (~2,000 instructions a loop, as much as indexing
two attributes).

A view of a message built with OTLP's own classes (a test's, one read from OTLP/JSON) reads
it as the chain parses it: converted by its bytes (``classes.received``), once a view.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, cast

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from collector.otlp import classes
from collector.otlp.inplace import SpanBytes
from collector.otlp.shapes import Shape, shape_of

_ERROR = Status.STATUS_CODE_ERROR
_OK = Status.STATUS_CODE_OK
_EVENT_NAME = "event.name"
_MISSING: Any = object()
_SPAN, _RESOURCE, _LOG_RECORD = classes.Span, classes.Resource, classes.LogRecord


def attribute_map(message: Span | Span.Event | Resource | LogRecord) -> Mapping[str, AnyValue]:
    """The attributes of a span, span event, resource or log record of ``collector.otlp.classes``
    (typed as OTLP's own), a map: ``[]`` of a key it does not hold adds it (test with ``in``
    first; ``get`` parses keyword arguments, a cost on the hot path)."""
    return cast("Mapping[str, AnyValue]", message.attributes)


def value_of(value: AnyValue) -> Any:
    """An OTLP AnyValue as a plain Python value (str, bool, int, float, bytes, list, dict)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values[:]]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values[:]}
    return getattr(value, kind)


def as_text(value: Any) -> str | None:
    """A value as the text a detector reads: strings as they are, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    # bytes can sit inside arrays and kvlists too: render them as hex, like OTLP/JSON ids.
    return json.dumps(
        value, ensure_ascii=False, default=lambda b: b.hex() if isinstance(b, bytes) else str(b)
    )


_STRING_TAG = 0x0A  # AnyValue's string_value: field 1, length-delimited


class Encoded:
    """A string value as protobuf holds it: UTF-8 bytes, ``data[start:end]``, made a ``str``
    only on request.  Making a ``str`` of text that is not ASCII costs ~10x copying its bytes;
    a chat span's history repeats the conversation so far, so its reader compares bytes with
    the history read before and decodes what is new (``text_from``)."""

    __slots__ = ("_text", "data", "end", "start")

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.start = start
        self.end = len(data) if end is None else end
        self._text: str | None = None

    @classmethod
    def of(cls, text: str) -> Encoded:
        encoded = cls(text.encode())
        encoded._text = text
        return encoded

    def __len__(self) -> int:
        """The length in bytes."""
        return self.end - self.start

    def byte(self, at: int) -> int:
        return self.data[self.start + at]

    def has_at(self, piece: bytes, at: int) -> bool:
        """The bytes from ``at`` on begin with ``piece`` (``piece`` within this value)."""
        return self.data.startswith(piece, self.start + at, self.end)

    def piece(self, at: int, to: int) -> bytes:
        return self.data[self.start + at : self.start + to]

    def text(self) -> str:
        """The whole text (made once).  Bytes that are not UTF-8 (text read in place from a
        request that was repaired on parsing, ``inplace``) read as U+FFFD, as the repair does."""
        if self._text is None:
            self._text = self.data[self.start : self.end].decode("utf-8", "replace")
        return self._text

    def text_from(self, at: int, to: int | None = None) -> str:
        """The text from byte ``at`` to byte ``to`` (the end), each at a character's first byte."""
        return self.data[self.start + at : self.end if to is None else self.start + to].decode(
            "utf-8", "replace"
        )


def encoded_of(value: AnyValue) -> Encoded | None:
    """A string AnyValue's text as its UTF-8 bytes (copied, not decoded); None for any other."""
    data = value.SerializeToString()
    if not data or data[0] != _STRING_TAG:  # no string, or unknown fields first
        return Encoded.of(value.string_value) if value.WhichOneof("value") == "string_value" else None
    length = data[1]
    if length < 0x80:  # the string's length, a varint: one byte up to 127
        return Encoded(data, 2, 2 + length)
    length &= 0x7F
    shift, at = 7, 2
    while True:
        byte = data[at]
        length |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return Encoded(data, at, at + length)
        shift += 7


class Attributes:
    """Key lookup over an attribute map (``collector.otlp.classes``), read lazily.

    A lookup is protobuf's, in C; a value becomes a Python value (``value_of``) the first
    time it is read, and is kept.  ``name``: the span's name, if the map is a span's (it
    helps find the map's ``shape``)."""

    __slots__ = ("_in_place", "_map", "_name", "_read", "_shape")

    def __init__(
        self, attributes: Mapping[str, AnyValue], in_place: SpanBytes | None = None, name: str | None = None
    ) -> None:
        self._map = attributes
        self._in_place = in_place  # where the strings sit in the request as received, if known
        self._read: dict[str, Any] = {}  # key -> its value, once read
        self._shape: Shape | None = None
        self._name = name

    def __contains__(self, key: str) -> bool:
        return key in self._map

    def by_key(self) -> Collection[str]:
        """The keys, for a caller that tests several keys (``key in``) without a call for
        each.  Read only."""
        return self._map

    def get(self, key: str) -> Any:
        """The value under ``key`` as a Python value, or None."""
        read = self._read
        value = read.get(key, _MISSING)
        if value is _MISSING:
            attributes = self._map
            if key in attributes:  # ``in``, then ``[]``: the map's ``get`` parses keyword arguments
                any_value = attributes[key]
                # ``value_of``, without a call for the common case: text (an AnyValue holding
                # anything else reads as "")
                value = read[key] = any_value.string_value or value_of(any_value)
            else:
                value = read[key] = None
        return value

    def encoded(self, key: str) -> Encoded | None:
        """The string under ``key`` as its UTF-8 bytes (``Encoded``), or None (absent, or no
        string).  A text read already is encoded from it."""
        value = self._read.get(key, _MISSING)
        if value is not _MISSING:
            return Encoded.of(value) if type(value) is str else None
        attributes = self._map
        if key not in attributes:
            return None
        if self._in_place is not None:
            where = self._in_place.string(key)
            if where is not None:
                return Encoded(self._in_place.raw, where[0], where[1])  # no copy
        return encoded_of(attributes[key])

    def text(self, key: str) -> str | None:
        """``get``'s value as text (``as_text``)."""
        read = self._read
        value = read.get(key, _MISSING)
        if value is _MISSING:  # ``get``, inline: most reads are texts
            attributes = self._map
            if key in attributes:
                any_value = attributes[key]
                value = read[key] = any_value.string_value or value_of(any_value)
            else:
                value = read[key] = None
        return value if type(value) is str or value is None else as_text(value)

    def first_text(self, keys: Iterable[str]) -> str | None:
        """The text of the first of ``keys`` present (which may be empty), or None."""
        present = self._map
        for key in keys:
            if key in present:
                return self.text(key)
        return None

    def keys(self) -> Collection[str]:
        """The keys (``key in`` tests them).  Read only."""
        return self._map

    def shape(self) -> Shape:
        """The keys (``shape_of``): what one instrumentation's spans of one kind share, so
        that what depends on the keys alone can be worked out once for all of them.  The
        order is not the map's for every map (the same keys in another order may give the
        shape found first), and the map's order varies between processes (upb seeds its hash
        per process): what depends on the order is worked out from the keys sorted."""
        shape = self._shape
        if shape is None:
            shape = self._shape = shape_of(self._map, self._name)
        return shape


class ResourceView:
    """One resource, shared by every span or log record under it."""

    __slots__ = ("attrs",)

    def __init__(self, resource: Resource) -> None:
        if type(resource) is not _RESOURCE:
            resource = classes.received(resource)
        self.attrs = Attributes(resource.attributes)  # a map (``attribute_map``)


class EventView:
    """One span event: its position in the span, its name, time and attributes (read when
    first asked for: most events are passed over by their name)."""

    __slots__ = ("_attrs", "_event", "name", "position")

    def __init__(self, position: int, event: Span.Event) -> None:
        self.position = position
        self._event = event
        self.name = event.name
        self._attrs: Attributes | None = None

    @property
    def attrs(self) -> Attributes:
        if self._attrs is None:
            self._attrs = Attributes(attribute_map(self._event))
        return self._attrs

    @property
    def time_unix_nano(self) -> int:
        return self._event.time_unix_nano


class SpanView:
    """One span.  ``trace_id``, ``span_id``: its ids, when the caller has read them already
    (each read of a protobuf field makes a new ``bytes``)."""

    __slots__ = ("_events", "_span_id", "_trace_id", "attrs", "resource", "scope", "span")

    def __init__(
        self,
        span: Span,
        scope: str,
        resource: ResourceView,
        in_place: SpanBytes | None = None,
        trace_id: bytes | None = None,
        span_id: bytes | None = None,
    ) -> None:
        if type(span) is not _SPAN:
            span = classes.received(span)
        self.span = span
        self.scope = scope
        self.resource = resource
        self.attrs = Attributes(span.attributes, in_place, span.name)  # a map (``attribute_map``)
        self._events: list[EventView] | None = None
        self._trace_id = trace_id
        self._span_id = span_id

    @property
    def events(self) -> list[EventView]:
        """The span's events, in span order."""
        if self._events is None:
            events = self.span.events
            self._events = [EventView(at, event) for at, event in enumerate(events[:])] if events else []
        return self._events

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def trace_id(self) -> str:
        return (self.span.trace_id if self._trace_id is None else self._trace_id).hex()

    @property
    def span_id(self) -> str:
        return (self.span.span_id if self._span_id is None else self._span_id).hex()

    @property
    def is_error(self) -> bool:
        return self.span.status.code == _ERROR

    @property
    def status_message(self) -> str:
        return self.span.status.message

    @property
    def is_ok(self) -> bool:
        """Whether the span's status was set to OK (not merely left unset)."""
        return self.span.status.code == _OK


class LogView:
    __slots__ = ("_fields", "attrs", "record", "resource", "scope")

    def __init__(self, record: LogRecord, scope: str, resource: ResourceView) -> None:
        if type(record) is not _LOG_RECORD:
            record = classes.received(record)
        self.record = record
        self.scope = scope
        self.resource = resource
        self.attrs = Attributes(attribute_map(record))
        self._fields: tuple[str, dict[str, Any]] | None = _MISSING

    @property
    def message_fields(self) -> tuple[str, dict[str, Any]] | None:
        """The body as (message, fields) when a logger wrote it ``[message, "<JSON object>"]``
        (a line's structured fields beside its message), else None.  Read once a record."""
        if self._fields is _MISSING:
            self._fields = _message_fields(self.record.body)
        return self._fields

    @property
    def event_name(self) -> str:
        # OTLP 1.5+ has a field; older emitters put it in the `event.name` attribute.  The
        # attribute wins where both are set: bridges from logging libraries fill the field
        # with their own callsite name ("event otel/src/tool_result.rs:54": Codex CLI's Rust
        # tracing bridge) and the attribute with the event's.
        return self.attrs.text(_EVENT_NAME) or self.record.event_name or ""

    @property
    def body(self) -> Any:
        return value_of(self.record.body)


def _message_fields(body: AnyValue) -> tuple[str, dict[str, Any]] | None:
    if body.WhichOneof("value") != "array_value" or len(body.array_value.values) != 2:
        return None
    values = body.array_value.values
    message, fields = values[0], values[1]  # not unpacked: see the module doc
    if message.WhichOneof("value") != "string_value" or fields.WhichOneof("value") != "string_value":
        return None
    text = fields.string_value
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # not JSON (a logger's rendering: ``undefined``), too deep
        return None
    return (message.string_value, parsed) if isinstance(parsed, dict) else None
