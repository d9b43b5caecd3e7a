"""Read-only views over OTLP spans and log records, shared by the assembler and detectors.

A view wraps the protobuf message as received.  Reading a protobuf field from Python costs
a wrapper object per element (a span's 10-30 attributes cost more than parsing the whole
span), so a view reads each repeated field at most once, and keeps only what somebody reads:

- attributes: one pass collects the keys declared with ``index`` (the detectors' and the
  default session keys), already converted to Python values; any other key is found by a
  full scan the first time it is asked for, so an undeclared key is slower, never missed.
- span events: one pass collects the declared (event name, attribute) fields, in event
  order, and within an event in key order (an event read as a map has no other).

Where the C scanner is built (``collector/wire_scan.c``; not in a pure-Python install), the
detection worker reads both straight from the request's bytes instead (``scan``), and the
views are given them: the same values, with no object made for an undeclared attribute.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

_ERROR = Status.STATUS_CODE_ERROR
_FIELD = descriptor_pb2.FieldDescriptorProto
_EVENT_NAME = "event.name"
_MISSING: Any = object()

EventField = tuple[int, str, str, Any]  # (event position in the span, event name, key, value)

# What the one pass keeps; declared by ``collector.detect`` when it is imported (``index``).
_keys: frozenset[str] = frozenset()
_prefixes: tuple[str, ...] = ()
_event_fields: dict[str, tuple[str, ...]] = {}  # event name -> attribute keys, sorted


def _wire_scan() -> Any:
    try:
        from collector import wire_scan
    except ImportError:  # a pure-Python install: the views make their one pass themselves
        return None
    return wire_scan


wire_scan: Any = _wire_scan()  # the C scanner's module, or None
_scanner: Any = None  # a wire_scan.Scanner for what ``index`` declared

# One span as the scanner reads it: (resource position, trace_id, span_id, declared values or
# None, flags, declared event fields or None); see ``collector/wire_scan.pyi``.
Scanned = tuple[int, bytes, bytes, dict[str, Any] | None, int, list[EventField] | None]
PREFIXED = 1  # flags, as wire_scan.PREFIXED: a key with a declared prefix was found
UNDECODED = 2  # flags, as wire_scan.UNDECODED: a value was left as its encoded AnyValue
NO_VALUES: dict[str, Any] = {}  # shared by every span with no declared attribute: never changed
_NO_EVENTS: list[EventField] = []


def index(
    keys: Iterable[str], prefixes: Iterable[str] = (), event_fields: Iterable[tuple[str, str]] = ()
) -> None:
    """Declare the attribute keys (and key prefixes) and the (event name, attribute) fields
    that views collect in their single pass.  Adds to what was declared before."""
    global _keys, _prefixes, _event_fields, _scanner
    _keys = _keys | frozenset(keys)
    _prefixes = tuple(dict.fromkeys((*_prefixes, *prefixes)))
    fields = {name: set(attrs) for name, attrs in _event_fields.items()}
    for name, key in event_fields:
        fields.setdefault(name, set()).add(key)
    _event_fields = {name: tuple(sorted(attrs)) for name, attrs in fields.items()}
    if wire_scan is not None:
        _scanner = wire_scan.Scanner(sorted(_keys), (), _prefixes, _event_fields)


def scan(raw: bytes | memoryview) -> list[Scanned] | None:
    """Every span of an encoded trace request with its declared attributes and event fields,
    in request order, read in C; None without the scanner, or for input it leaves to
    protobuf (which then parses it, or raises)."""
    if _scanner is None:
        return None
    found = _scanner.spans(raw)
    return None if found is None else found[1]


def decoded_values(values: dict[str, Any]) -> dict[str, Any]:
    """Scanned values with those the scanner left encoded (bytes) decoded."""
    return {key: decoded_value(v) if type(v) is bytes else v for key, v in values.items()}


def scanned_values(
    values: dict[str, Any] | None, flags: int, events: list[EventField] | None
) -> tuple[dict[str, Any], list[EventField]]:
    """A scanned span's values and event fields as the one pass reads them: the values the
    scanner left encoded (anything but a lone string), decoded."""
    if flags & UNDECODED:
        if values:
            values = decoded_values(values)
        if events:
            events = [
                (at, name, key, decoded_value(v) if type(v) is bytes else v) for at, name, key, v in events
            ]
    return (values or NO_VALUES), (events or _NO_EVENTS)


def scanned_view_parts(kvs: Any, span: Scanned) -> tuple[Attributes, list[EventField]]:
    """A scanned span's attributes (``kvs``: the parsed span's, for undeclared keys) and its
    declared event fields, ready for ``SpanView``."""
    _, _, _, values, flags, events = span
    indexed, fields = scanned_values(values, flags, events)
    return Attributes(kvs, indexed, bool(flags & PREFIXED)), fields


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


def decoded_value(raw: bytes) -> Any:
    """An encoded ``AnyValue`` as ``value_of`` reads it, without a message object when it is
    a lone string (most attributes are).  Anything else, invalid input included, goes
    through the class, which raises as a full parse would."""
    text = _lone_string(raw)
    return text if text is not None else value_of(AnyValue.FromString(raw))


def _lone_string(raw: bytes) -> str | None:
    """The text of an ``AnyValue`` encoded as its string field alone: tag 0x0A, a length of
    one or two varint bytes, then exactly that many bytes of UTF-8; else None."""
    size = len(raw)
    if size < 2 or raw[0] != 0x0A:
        return None
    length, start = raw[1], 2
    if length >= 0x80:
        if size < 3 or raw[2] >= 0x80:
            return None
        length, start = (length & 0x7F) | (raw[2] << 7), 3
    if start + length != size:
        return None
    try:
        return raw[start:].decode()
    except UnicodeDecodeError:
        return None


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


def _is_indexed(key: str) -> bool:
    return key in _keys or _has_prefix(key, _prefixes)


def _has_prefix(key: str, prefixes: tuple[str, ...]) -> bool:
    # Not ``key.startswith(prefixes)``: compiled, a tuple argument is a generic method call
    # (~800 instructions), and a str argument a direct one; this runs for most attributes.
    for prefix in prefixes:  # noqa: SIM110 - a loop makes no generator per call
        if key.startswith(prefix):
            return True
    return False


class Attributes:
    """Key lookup over a repeated KeyValue field, or over one read as a map (``map_entry``),
    read in one pass (see the module doc)."""

    __slots__ = ("_all", "_kvs", "_prefixed", "_values")

    def __init__(self, kvs: Any, scanned: dict[str, Any] | None = None, prefixed: bool = False) -> None:
        """``scanned``: the declared values, already read from the bytes (``scan``)."""
        self._kvs = kvs
        self._all: dict[str, Any] | None = None
        if scanned is not None:
            self._values = scanned
            self._prefixed = prefixed
            return
        keys, prefixes = _keys, _prefixes
        values: dict[str, Any] = {}
        prefixed = False
        if type(kvs) is _Map:
            for key in kvs:  # keys only: a value is decoded when it is wanted
                if key in keys:
                    values[key] = decoded_value(kvs[key])
                elif _has_prefix(key, prefixes):
                    values[key] = decoded_value(kvs[key])
                    prefixed = True
        else:
            for kv in kvs:
                key = kv.key
                if key in keys:
                    values[key] = value_of(kv.value)
                elif _has_prefix(key, prefixes):
                    values[key] = value_of(kv.value)
                    prefixed = True
        self._values = values
        self._prefixed = prefixed

    @property
    def indexed(self) -> dict[str, Any]:
        """The declared keys present, as Python values: what hot loops read directly (a dict,
        so compiled callers look keys up natively; read it, never change it)."""
        return self._values

    def _full(self) -> dict[str, Any]:
        """Every attribute, undecoded: an ``AnyValue``, or its bytes when read as a map."""
        if self._all is None:
            kvs = self._kvs
            if type(kvs) is _Map:
                self._all = dict(kvs.items())
            elif type(kvs) is _Raw:  # encoded KeyValue messages (``ScannedTracesData``)
                self._all = {kv.key: kv.value for kv in map(KeyValue.FromString, kvs)}
            else:
                self._all = {kv.key: kv.value for kv in kvs}
        return self._all

    def __contains__(self, key: str) -> bool:
        if key in self._values:
            return True
        return False if _is_indexed(key) else key in self._full()

    def get(self, key: str) -> Any:
        value = self._values.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if _is_indexed(key):
            return None
        raw = self._full().get(key)
        if raw is None:
            return None
        return decoded_value(raw) if type(raw) is bytes else value_of(raw)

    def text(self, key: str) -> str | None:
        return as_text(self.get(key))

    def first_text(self, keys: tuple[str, ...]) -> str | None:
        """The text of the first of ``keys`` present (which may be empty), or None."""
        for key in keys:
            if key in self:
                return self.text(key)
        return None

    def keys(self) -> Any:
        return self._full().keys()

    def keys_with_prefix(self, prefix: str) -> list[str]:
        if not _has_prefix(prefix, _prefixes):
            return [key for key in self._full() if key.startswith(prefix)]
        return [key for key in self._values if key.startswith(prefix)] if self._prefixed else []

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        return {key: self.get(key) for key in self.keys_with_prefix(prefix)}


def map_entry(message: descriptor_pb2.DescriptorProto) -> str:
    """Declare on ``message`` the entry type of a ``map<string, bytes>`` and return its name.
    A ``KeyValue`` (key = 1, value = 2) is encoded exactly as such an entry, so a repeated
    ``KeyValue`` field read as this map is indexed by key in C as it is parsed, each value
    kept as its encoded ``AnyValue``: reading the few wanted attributes makes no object for
    the others (``decoded_value``).  As in a dict, a key written twice keeps its last value;
    iteration order is the map's, not the sender's."""
    entry = message.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_FIELD.TYPE_STRING, label=_FIELD.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_FIELD.TYPE_BYTES, label=_FIELD.LABEL_OPTIONAL)
    return str(entry.name)


def _traces_copy(ours: str, reshape: Callable[[Any, Any, str], None]) -> Any:
    """``TracesData`` (field for field an Export request's) in package ``ours``, with its
    ``Span`` and ``Span.Event`` messages changed by ``reshape(span, event, ours)``."""
    file = descriptor_pb2.FileDescriptorProto()
    trace_pb2.DESCRIPTOR.CopyToProto(file)
    file.name, file.package = f"{ours.replace('.', '/')}.proto", ours
    del file.service[:]
    theirs = f".{trace_pb2.DESCRIPTOR.package}."
    pending = list(file.message_type)
    while pending:  # the copy's own types, nested ones included, refer to each other
        message = pending.pop()
        pending += message.nested_type
        for field in message.field:
            if field.type_name.startswith(theirs):
                field.type_name = f".{ours}.{field.type_name[len(theirs) :]}"
    (span,) = (m for m in file.message_type if m.name == "Span")
    (event,) = (m for m in span.nested_type if m.name == "Event")
    reshape(span, event, ours)
    pool = descriptor_pool.Default()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{ours}.TracesData"))


def _attributes_as_maps(span: Any, event: Any, ours: str) -> None:
    for message, path in ((span, "Span"), (event, "Span.Event")):
        entry = map_entry(message)
        (attributes,) = (f for f in message.field if f.name == "attributes")
        attributes.type_name = f".{ours}.{path}.{entry}"


def _attributes_and_events_as_bytes(span: Any, event: Any, ours: str) -> None:
    for field in span.field:
        if field.name in ("attributes", "events"):
            field.type = _FIELD.TYPE_BYTES
            field.ClearField("type_name")


# What the detection worker parses.  Without the scanner: the attributes of each span and
# span event read as ``map<string, bytes>`` (see ``map_entry``), each value an encoded
# ``AnyValue`` that ``decoded_value`` reads when wanted.  With it (the scanner read the
# declared attributes and events already): a span's attributes and events left as their
# encoded messages, which parses in a third of the time; an undeclared key is found by
# decoding them (``Attributes``).
MappedTracesData: Any = _traces_copy("skillgauge.mapped", _attributes_as_maps)
ScannedTracesData: Any = _traces_copy("skillgauge.scanned", _attributes_and_events_as_bytes)
_Raw: Any = type(ScannedTracesData().resource_spans.add().scope_spans.add().spans.add().attributes)
_Map: Any = type(MappedTracesData().resource_spans.add().scope_spans.add().spans.add().attributes)


class ResourceView:
    """One resource, shared by every span under it."""

    __slots__ = ("attrs",)

    def __init__(self, resource: Resource, attrs: Attributes | None = None) -> None:
        self.attrs = attrs if attrs is not None else Attributes(resource.attributes)


class SpanView:
    __slots__ = ("_events", "attrs", "resource", "scope", "span")

    def __init__(
        self,
        span: Span,
        scope: str,
        resource: ResourceView,
        attrs: Attributes | None = None,
        events: list[EventField] | None = None,
    ) -> None:
        self.span = span
        self.scope = scope
        self.resource = resource
        self.attrs = attrs if attrs is not None else Attributes(span.attributes)  # one pass each
        self._events = events

    @property
    def events(self) -> list[EventField]:
        """The declared event fields the span holds, in event and attribute order."""
        if self._events is None:
            self._events = _event_values(self.span)
        return self._events

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


def _event_values(span: Span) -> list[EventField]:
    # Repeated fields are walked by index: protobuf's containers have no iterator of their
    # own, and Python's fallback ends each walk by raising (and formatting) an IndexError.
    found: list[EventField] = []
    events = span.events
    if not _event_fields or not events:
        return found
    for position in range(len(events)):
        event = events[position]
        name = event.name
        wanted = _event_fields.get(name)
        if wanted is None:
            continue
        attributes = event.attributes
        if type(attributes) is _Map:  # the worker's schema: the wanted keys looked up in C
            for key in wanted:
                raw = attributes.get(key)
                if raw is not None:
                    found.append((position, name, key, decoded_value(raw)))
            continue
        values: dict[str, Any] = {}  # as a map reads them: a key written twice keeps its last
        for i in range(len(attributes)):
            kv = attributes[i]
            if kv.key in wanted:
                values[kv.key] = kv.value
        found += [(position, name, key, value_of(values[key])) for key in wanted if key in values]
    return found


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
        return self.record.event_name or self.attrs.text(_EVENT_NAME) or ""

    @property
    def body(self) -> Any:
        return value_of(self.record.body)
