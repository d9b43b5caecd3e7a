"""OTLP protobuf bytes to messages, when protobuf alone would refuse the whole request.

protobuf refuses a whole message when one string field holds bytes that are not UTF-8, or
when messages nest deeper than its decoder's limit (100); one such attribute or log body (a
tool's output cut in the middle of a character, a deeply nested JSON value written as
nested AnyValues) would cost every other item of the request.  ``parse`` then reads the
message with U+FFFD in place of each bad sequence, as a decoder with ``errors="replace"``
would, and with every message nested deeper than ``MAX_DEPTH`` left empty (an AnyValue
without a value).  Bytes that are no protobuf at all still fail with ``DecodeError``.
"""

from __future__ import annotations

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


def repaired(descriptor: Descriptor, body: bytes, depth: int = 0) -> bytes:
    """``body``, a serialized ``descriptor`` message at nesting ``depth``, with the bytes of
    every string field decoded as UTF-8 with errors replaced and every message deeper than
    ``MAX_DEPTH`` empty; every other byte as it was."""
    out = bytearray()
    at, end = 0, len(body)
    while at < end:
        start = at
        tag, at = _varint(body, at)
        tag_end = at
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            _, at = _varint(body, at)
        elif wire == _FIXED64:
            at += 8
        elif wire == _FIXED32:
            at += 4
        elif wire == _LENGTH:
            length, at = _varint(body, at)
            payload, at = body[at : at + length], at + length
            if at > end:
                raise DecodeError("truncated message")
            field = descriptor.fields_by_number.get(number)
            if field is not None and field.type == FieldDescriptor.TYPE_STRING:
                payload = payload.decode("utf-8", "replace").encode()
            elif field is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
                payload = b"" if depth >= MAX_DEPTH else repaired(field.message_type, payload, depth + 1)
            else:
                out += body[start:at]
                continue
            out += body[start:tag_end] + _encode_varint(len(payload)) + payload
            continue
        else:
            raise DecodeError(f"unexpected wire type {wire}")
        if at > end:
            raise DecodeError("truncated message")
        out += body[start:at]
    return bytes(out)


def _varint(body: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(body) or shift > 63:
            raise DecodeError("truncated varint")
        byte = body[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
