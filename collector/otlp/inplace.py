"""Span attribute strings read in place, from the request's bytes as received.

Taking a long string out of a parsed protobuf message copies all of it, every time: a chat
span recording the conversation so far (hundreds of KB) costs a copy of the whole history on
every span, though its reader compares bytes and decodes only what is new
(``Encoded.text_from``).  The bytes are already there, in the request as received: this
module finds where each span's attributes sit in them, so that ``Attributes.encoded`` hands
out a view of those bytes (``Encoded``) instead of a copy.

Only requests whose spans are large on average (``MIN_AVERAGE_SPAN_BYTES``) are read so:
finding the spans walks the request's framing in Python, which costs more than copying a
small span's strings.  A span is read in place only when the walk reaches it with its ids
(trace id, span id) equal to the parsed span's; anything else (bytes that do not frame as
the request did) leaves it to the parsed message.  A request repaired on parsing
(``wire.parse``: text that is not UTF-8) may hold bad sequences in place: ``Encoded``
decodes with U+FFFD for them, as the repair does.
"""

from __future__ import annotations

from collections.abc import Iterator

from collector.otlp.wire import Malformed, encode_varint, fields, varint

# A request whose spans average at least this many bytes has its spans read in place.
MIN_AVERAGE_SPAN_BYTES = 16 * 1024
_LENGTH = 2  # the wire type of a length-delimited field
_RESOURCE_SPANS = 1  # ExportTraceServiceRequest.resource_spans
_SCOPE_SPANS = 2  # ResourceSpans.scope_spans
_SPANS = 2  # ScopeSpans.spans
_TRACE_ID, _SPAN_ID, _ATTRIBUTES = 1, 2, 9  # Span fields
_KEY, _VALUE = 1, 2  # KeyValue fields
_STRING_VALUE = 1  # AnyValue.string_value
_TRACE_ID_TAG, _SPAN_ID_TAG = _TRACE_ID << 3 | _LENGTH, _SPAN_ID << 3 | _LENGTH
_SPANS_TAG = _SPANS << 3 | _LENGTH
_ATTRIBUTE_TAG, _VALUE_TAG = _ATTRIBUTES << 3 | _LENGTH, _VALUE << 3 | _LENGTH


def span_ranges(raw: bytes) -> Iterator[tuple[int, int]]:
    """Where each span of an ExportTraceServiceRequest sits in ``raw``, in the order the
    parsed request holds them (resource spans, scope spans, spans)."""
    for number, wire, _, rs_start, rs_end in fields(raw, 0, len(raw)):
        if number != _RESOURCE_SPANS or wire != _LENGTH:
            continue
        for number, wire, _, ss_start, ss_end in fields(raw, rs_start, rs_end):
            if number == _SCOPE_SPANS and wire == _LENGTH:
                yield from _spans_in(raw, ss_start, ss_end)


def _spans_in(raw: bytes, at: int, end: int) -> Iterator[tuple[int, int]]:
    """Where each span of the ScopeSpans in ``raw[at:end]`` sits: its spans are read in one
    loop here, as most of its fields are spans (``fields`` reads the others)."""
    while at < end:
        if raw[at] != _SPANS_TAG:  # its scope, its schema URL, or a field unknown here
            number, wire, _, value_start, at = next(fields(raw, at, end))
            if number == _SPANS and wire == _LENGTH:
                yield value_start, at
            continue
        size, start = varint(raw, at + 1, end)
        at = start + size
        if at > end:
            raise Malformed("truncated message")
        yield start, at


def worth_it(raw: bytes, spans: int) -> bool:
    """Whether a request of ``spans`` spans in ``raw`` bytes is read in place."""
    return len(raw) >= MIN_AVERAGE_SPAN_BYTES * max(1, spans)


def next_span(
    raw: bytes, places: Iterator[tuple[int, int]], trace_id: bytes, span_id: bytes
) -> tuple[SpanBytes | None, Iterator[tuple[int, int]] | None]:
    """The next span's place in ``raw`` (``span_ranges``; the span's ids: ``trace_id``,
    ``span_id``), and the places left (None once the bytes do not frame as the parsed
    request: its spans are then read from the parsed message)."""
    try:
        start, end = next(places)
    except (StopIteration, Malformed):
        return None, None
    return SpanBytes(raw, start, end, trace_id, span_id), places


class SpanBytes:
    """One span's place in the request bytes.  An attribute's string is looked for where
    its key is written (a search in C over the span's bytes, not a walk of its fields in
    Python) and taken when the bytes around it frame a span attribute: the attribute's tag
    and length before the key, a string value after it, within the span.

    The strings found (of ``SKIPPED_FROM`` bytes or more: a history of hundreds of KB) are
    not searched again: a later key is looked for before and after them.  Their bytes are
    one string value, where no attribute of the span begins."""

    __slots__ = ("_checked", "_found", "end", "raw", "span_id", "start", "trace_id")

    def __init__(self, raw: bytes, start: int, end: int, trace_id: bytes, span_id: bytes) -> None:
        self.raw = raw
        self.start = start
        self.end = end
        self.trace_id = trace_id  # the parsed span's: the bytes must open with the same ids
        self.span_id = span_id
        self._checked: bool | None = None
        self._found: list[tuple[int, int]] | None = None  # long strings found, in order

    def _is_the_span(self) -> bool:
        if self._checked is None:  # the span's first fields: its trace id, then its span id
            trace_id, span_id = self.trace_id, self.span_id
            self._checked = (
                len(trace_id) < 0x80
                and len(span_id) < 0x80
                and self.raw.startswith(
                    b"".join(
                        (
                            _ID_TAGS[0],
                            _LENGTHS[len(trace_id)],
                            trace_id,
                            _ID_TAGS[1],
                            _LENGTHS[len(span_id)],
                            span_id,
                        )
                    ),
                    self.start,
                    self.end,
                )
            )
        return self._checked

    def string(self, key: str) -> tuple[int, int] | None:
        """Where the string value of span attribute ``key`` sits in ``raw``, or None: absent,
        no string, not found in place, or written twice (the parsed message holds its last
        value: a map's, ``collector.otlp.classes``; the caller reads it there)."""
        if not (self._checked if self._checked is not None else self._is_the_span()):
            return None
        pattern = _KEY_FIELDS.get(key) or _key_field(key)
        first = self._search(pattern, self.start)
        if first is None:
            return None
        where = self._record(first[1])
        if self._search(pattern, first[0]) is not None:
            return None  # written twice
        return where

    def _search(self, pattern: bytes, at: int) -> tuple[int, tuple[int, int] | None] | None:
        """The first attribute whose key field is ``pattern`` beginning at ``at`` or after it,
        outside the long strings found (``_attribute_in``)."""
        raw, end = self.raw, self.end
        found = self._found
        if found is None:
            return _attribute_in(raw, pattern, at, end, end)
        for skip_from, skip_to in (*found, (end, end)):  # the bytes between the strings found
            if skip_from > at:
                attribute = _attribute_in(raw, pattern, at, skip_from, end)
                if attribute is not None:
                    return attribute
            at = max(at, skip_to)
        return None

    def _record(self, where: tuple[int, int] | None) -> tuple[int, int] | None:
        if where is not None and where[1] - where[0] >= SKIPPED_FROM:
            found = self._found
            if found is None:
                self._found = [where]
            elif where not in found:
                found.append(where)
                found.sort()
        return where


_ID_TAGS = (bytes((_TRACE_ID_TAG,)), bytes((_SPAN_ID_TAG,)))
_LENGTHS = tuple(bytes((n,)) for n in range(0x80))  # each length of one byte, as written

# Strings of this many bytes or more, once found, are not searched again for another key.
SKIPPED_FROM = 4096

# Each key's KeyValue.key field as written (tag, length, UTF-8 name), for the keys readers ask
# for (a few dozen; bounded all the same, in number and length: keys come from the telemetry).
_KEY_FIELDS: dict[str, bytes] = {}
_KEY_FIELDS_KEPT = 1024
_KEY_CHARS_KEPT = 256


def _key_field(key: str) -> bytes:
    name = key.encode()
    field = bytes((_KEY << 3 | _LENGTH,)) + encode_varint(len(name)) + name
    if len(_KEY_FIELDS) < _KEY_FIELDS_KEPT and len(key) < _KEY_CHARS_KEPT:
        _KEY_FIELDS[key] = field
    return field


def _attribute_in(
    raw: bytes, pattern: bytes, start: int, to: int, end: int
) -> tuple[int, tuple[int, int] | None] | None:
    """The first attribute whose key field ``pattern`` begins in ``raw[start:to]`` (within the
    span ending at ``end``), as ``_attribute_at`` gives it; None for none."""
    at = raw.find(pattern, start, to)
    while at >= 0:
        try:
            attribute = _attribute_at(raw, at, end, len(pattern))
        except Malformed:
            attribute = None
        if attribute is not None:
            return attribute
        at = raw.find(pattern, at + 1, to)
    return None


def _attribute_at(raw: bytes, at: int, end: int, key_bytes: int) -> tuple[int, tuple[int, int] | None] | None:
    """When ``raw[at:]`` opens a span attribute's KeyValue (its key taking ``key_bytes``):
    where the KeyValue ends and where its string value sits (None: no string); else None."""
    # The KeyValue's tag, then its length: a varint of 1-5 bytes ending before ``at``, all
    # but its last byte with the high bit set (read here from its last byte back).
    tag_at = at - 2
    if tag_at < 0:
        return None
    length = raw[at - 1]
    if length & 0x80:
        return None
    byte = raw[tag_at]
    while byte & 0x80:
        length = length << 7 | byte & 0x7F
        tag_at -= 1
        if tag_at < 0 or at - tag_at > 6:
            return None
        byte = raw[tag_at]
    if byte != _ATTRIBUTE_TAG:
        return None
    kv_end = at + length
    if kv_end > end:
        return None
    value_at = at + key_bytes
    if value_at >= kv_end or raw[value_at] != _VALUE_TAG:
        return kv_end, None
    value_size, value_start = varint(raw, value_at + 1, kv_end)
    if value_start + value_size != kv_end:
        return None
    return kv_end, _string_of(raw, value_start, kv_end)


def _string_of(raw: bytes, start: int, end: int) -> tuple[int, int] | None:
    """Where an AnyValue's string sits, when the value it holds (its last field) is one."""
    if start < end and raw[start] == _STRING_VALUE << 3 | _LENGTH:  # most: the string, alone
        size, value_start = varint(raw, start + 1, end)
        if value_start + size == end:
            return value_start, end
    where: tuple[int, int] | None = None
    for number, wire, _, value_start, value_end in fields(raw, start, end):
        where = (value_start, value_end) if number == _STRING_VALUE and wire == _LENGTH else None
    return where


__all__ = ["MIN_AVERAGE_SPAN_BYTES", "Malformed", "SpanBytes", "next_span", "span_ranges", "worth_it"]
