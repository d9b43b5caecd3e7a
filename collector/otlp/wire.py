"""OTLP protobuf bytes to messages, when protobuf alone would refuse the whole request.

protobuf refuses a whole message when one string field holds bytes that are not UTF-8, or
when messages nest deeper than its decoder's limit (100); one such attribute or log body (a
tool's output cut in the middle of a character, a deeply nested JSON value written as
nested AnyValues) would cost every other item of the request.  ``parse`` then reads the
message with U+FFFD in place of each bad sequence, as a decoder with ``errors="replace"``
would, and with every message nested deeper than ``MAX_DEPTH`` left empty (an AnyValue
without a value).  Bytes that are no protobuf at all still fail with ``DecodeError``.

``fields`` is the one reader of protobuf's framing here: ``repaired`` walks a message with it,
and ``inplace`` walks a request's spans with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

M = TypeVar("M", bound=Message)

# In protobuf's DecodeError messages, any case: a string that is not UTF-8, nesting too deep.
_READABLE_AFTER_REPAIR = ("utf-8", "depth")
# Messages nested deeper than this are left empty: well inside the decoder's limit of 100.
MAX_DEPTH = 64
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


def parse(message: M, body: bytes) -> bool:
    """Parse ``body`` into ``message``; True when it had to be repaired (``repaired``)."""
    try:
        message.ParseFromString(body)
        return False
    except DecodeError as err:
        if not any(reason in str(err).lower() for reason in _READABLE_AFTER_REPAIR):
            raise
    message.ParseFromString(repaired(message.DESCRIPTOR, body))
    return True


class Malformed(DecodeError):  # type: ignore[misc]  # DecodeError is untyped in the stubs
    """Bytes that do not frame as protobuf where a walk of them expected a field."""


def varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    """The varint at ``data[at:]``, which must end before ``end``: (value, where it ends)."""
    if at + 2 < end:  # up to three bytes (tags, lengths up to 2 MiB) without a loop
        value = data[at]
        if value < 0x80:
            return value, at + 1
        second = data[at + 1]
        if second < 0x80:
            return value & 0x7F | second << 7, at + 2
        third = data[at + 2]
        if third < 0x80:
            return value & 0x7F | (second & 0x7F) << 7 | third << 14, at + 3
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise Malformed("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of the message in ``data[start:end]``: (field number, wire type, where the
    field starts (its tag), where its value starts, where it ends).  A length-delimited
    field's value is its payload, past the length; a varint's or fixed field's, its bytes.
    ``Malformed`` when a field does not end within ``end``."""
    at = start
    while at < end:
        field_start = at
        tag, at = varint(data, at, end)
        wire = tag & 7
        value_start = at
        if wire == _LENGTH:
            size, value_start = varint(data, at, end)
            at = value_start + size
        elif wire == _VARINT:
            _, at = varint(data, at, end)
        elif wire == _FIXED64:
            at += 8
        elif wire == _FIXED32:
            at += 4
        else:
            raise Malformed(f"unexpected wire type {wire}")
        if at > end:
            raise Malformed("truncated message")
        yield tag >> 3, wire, field_start, value_start, at


def repaired(descriptor: Descriptor, body: bytes, depth: int = 0) -> bytes:
    """``body``, a serialized ``descriptor`` message at nesting ``depth``, with the bytes of
    every string field decoded as UTF-8 with errors replaced and every message deeper than
    ``MAX_DEPTH`` empty; every other byte as it was."""
    out = bytearray()
    for number, wire, start, value_start, end in fields(body, 0, len(body)):
        field = descriptor.fields_by_number.get(number) if wire == _LENGTH else None
        if field is not None and field.type == FieldDescriptor.TYPE_STRING:
            payload = body[value_start:end].decode("utf-8", "replace").encode()
        elif field is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
            payload = (
                b"" if depth >= MAX_DEPTH else repaired(field.message_type, body[value_start:end], depth + 1)
            )
        else:
            out += body[start:end]
            continue
        out += encode_varint(number << 3 | _LENGTH) + encode_varint(len(payload)) + payload
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """``value`` (not negative) as protobuf writes a varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
