"""The one reader of protobuf framing (``wire.fields``): every field of a real message where
protobuf put it, and a field that runs past its bound refused as ``Malformed``, which callers
of the decoder catch as protobuf's own ``DecodeError``."""

from __future__ import annotations

from itertools import pairwise

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.otlp import wire


def test_fields_walk_every_field_of_a_span_where_protobuf_wrote_it() -> None:
    span = Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="chat", start_time_unix_nano=2**40, kind=3)
    span.attributes.append(KeyValue(key="k", value=AnyValue(double_value=1.5)))
    body = span.SerializeToString()
    found = list(wire.fields(body, 0, len(body)))
    assert [(number, wire_type) for number, wire_type, *_ in found] == [
        (1, 2),
        (2, 2),
        (5, 2),
        (6, 0),
        (7, 1),
        (9, 2),
    ]
    assert [body[value_start:end] for number, _, _, value_start, end in found if number in (1, 2, 5)] == [
        b"t" * 16,
        b"s" * 8,
        b"chat",
    ]
    assert found[0][2] == 0 and all(a[4] == b[2] for a, b in pairwise(found))
    assert found[-1][4] == len(body)
    attribute = KeyValue.FromString(body[found[-1][3] : found[-1][4]])
    assert attribute.value.double_value == 1.5


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_field_past_its_bound_is_malformed_and_a_decode_error(cut: int) -> None:
    body = Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="chat").SerializeToString()
    with pytest.raises(wire.Malformed) as raised:
        list(wire.fields(body, 0, len(body) - cut))
    assert isinstance(raised.value, DecodeError)


def test_an_unknown_wire_type_is_malformed() -> None:
    with pytest.raises(wire.Malformed, match="wire type"):
        list(wire.fields(bytes([0x0B]), 0, 1))  # field 1, wire type 3 (a group start)


def test_varints_read_to_their_end_bound() -> None:
    assert wire.varint(wire.encode_varint(300), 0, 2) == (300, 2)
    with pytest.raises(wire.Malformed):
        wire.varint(wire.encode_varint(300), 0, 1)


@pytest.mark.parametrize(
    "value", [0, 1, 127, 128, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**35 + 5, 2**63]
)
def test_a_varint_reads_the_same_whatever_follows_it(value: int) -> None:
    encoded = wire.encode_varint(value)
    for after in (b"", b"\x00", b"\x80\x80\x80"):
        assert wire.varint(encoded + after, 0, len(encoded) + len(after)) == (value, len(encoded))
        assert wire.varint(b"\x01" + encoded + after, 1, 1 + len(encoded)) == (value, 1 + len(encoded))
    with pytest.raises(wire.Malformed):
        wire.varint(encoded + b"\x00\x00\x00", 0, len(encoded) - 1)
