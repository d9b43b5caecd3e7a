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


def span_ranges(raw: bytes) -> Iterator[tuple[int, int]]:
    """Where each span of an ExportTraceServiceRequest sits in ``raw``, in the order the
    parsed request holds them (resource spans, scope spans, spans)."""
    for number, wire, _, rs_start, rs_end in fields(raw, 0, len(raw)):
        if number != _RESOURCE_SPANS or wire != _LENGTH:
            continue
        for number, wire, _, ss_start, ss_end in fields(raw, rs_start, rs_end):
            if number != _SCOPE_SPANS or wire != _LENGTH:
                continue
            for number, wire, _, start, end in fields(raw, ss_start, ss_end):
                if number == _SPANS and wire == _LENGTH:
                    yield start, end


def worth_it(raw: bytes, spans: int) -> bool:
    """Whether a request of ``spans`` spans in ``raw`` bytes is read in place."""
    return len(raw) >= MIN_AVERAGE_SPAN_BYTES * max(1, spans)


class SpanBytes:
    """One span's place in the request bytes.  An attribute's string is looked for where
    its key is written (a search in C over the span's bytes, not a walk of its fields in
    Python) and taken when the bytes around it frame a span attribute: the attribute's tag
    and length before the key, a string value after it, within the span."""

    __slots__ = ("_checked", "end", "raw", "span_id", "start", "trace_id")

    def __init__(self, raw: bytes, start: int, end: int, trace_id: bytes, span_id: bytes) -> None:
        self.raw = raw
        self.start = start
        self.end = end
        self.trace_id = trace_id  # the parsed span's: the bytes must open with the same ids
        self.span_id = span_id
        self._checked: bool | None = None

    def _is_the_span(self) -> bool:
        if self._checked is None:
            ids = (
                bytes((_TRACE_ID << 3 | _LENGTH, len(self.trace_id)))
                + self.trace_id
                + bytes((_SPAN_ID << 3 | _LENGTH, len(self.span_id)))
                + self.span_id
            )
            self._checked = len(self.trace_id) < 0x80 and self.raw.startswith(ids, self.start, self.end)
        return self._checked

    def string(self, key: str) -> tuple[int, int] | None:
        """Where the string value of span attribute ``key`` sits in ``raw``, or None: absent,
        no string, or not found in place.  The first attribute of that key is taken: for a
        span that writes a key twice (the last one counts, as in a map) the caller reads the
        parsed message instead."""
        if not self._is_the_span():
            return None
        name = key.encode()
        pattern = bytes((_KEY << 3 | _LENGTH,)) + encode_varint(len(name)) + name
        raw, end = self.raw, self.end
        at = raw.find(pattern, self.start, end)
        while at >= 0:
            try:
                attribute = _attribute_at(raw, at, end, len(pattern))
            except Malformed:
                attribute = None
            if attribute is not None:
                return attribute[1]
            at = raw.find(pattern, at + 1, end)
        return None


def _attribute_at(raw: bytes, at: int, end: int, key_bytes: int) -> tuple[int, tuple[int, int] | None] | None:
    """When ``raw[at:]`` opens a span attribute's KeyValue (its key taking ``key_bytes``):
    where the KeyValue ends and where its string value sits (None: no string); else None."""
    for size in range(1, 6):  # the KeyValue's length before it, a varint of 1-5 bytes
        tag_at = at - size - 1
        if tag_at < 0 or raw[tag_at] != _ATTRIBUTES << 3 | _LENGTH:
            continue
        length, after = varint(raw, tag_at + 1, at)
        if after != at or at + length > end:
            continue
        value_at = at + key_bytes
        if value_at >= at + length or raw[value_at] != _VALUE << 3 | _LENGTH:
            return at + length, None
        value_size, value_start = varint(raw, value_at + 1, at + length)
        if value_start + value_size != at + length:
            return None
        return at + length, _string_of(raw, value_start, value_start + value_size)
    return None


def _string_of(raw: bytes, start: int, end: int) -> tuple[int, int] | None:
    """Where an AnyValue's string sits, when the value it holds (its last field) is one."""
    where: tuple[int, int] | None = None
    for number, wire, _, value_start, value_end in fields(raw, start, end):
        where = (value_start, value_end) if number == _STRING_VALUE and wire == _LENGTH else None
    return where


__all__ = ["MIN_AVERAGE_SPAN_BYTES", "Malformed", "SpanBytes", "span_ranges", "worth_it"]
