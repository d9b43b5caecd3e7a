"""Attribute reads through the views (``Attributes``): the same value as ``value_of`` for every
kind an AnyValue holds (an empty string, an unset value and a value with unknown fields too),
the same text as bytes (``encoded``), a key written twice read as its last value, and span
events read in span order with their attributes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.otlp import classes
from collector.otlp.shapes import shape_of
from collector.otlp.views import (
    Attributes,
    ResourceView,
    SpanView,
    attribute_map,
    encoded_of,
    value_of,
)


def _attributes(kvs: list[KeyValue]) -> Attributes:
    """``kvs`` as a span's attributes, parsed as the chain parses them (a map)."""
    return Attributes(attribute_map(classes.received(Span(attributes=kvs))))


VALUES = [
    AnyValue(string_value="text"),
    AnyValue(string_value=""),
    AnyValue(string_value="dash \u2014 and \U0001f600"),
    AnyValue(string_value="x" * 300),  # a length of two varint bytes
    AnyValue(bool_value=False),
    AnyValue(bool_value=True),
    AnyValue(int_value=0),
    AnyValue(int_value=-7),
    AnyValue(double_value=0.0),
    AnyValue(double_value=1.5),
    AnyValue(bytes_value=b""),
    AnyValue(bytes_value=b"\x00\x01"),
    AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="a"), AnyValue(int_value=1)])),
    AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(string_value="v"))])),
    AnyValue(),
]


def _with_unknown_field_first(value: AnyValue) -> AnyValue:
    """``value`` as a sender that writes a field this version does not know before it."""
    unknown = bytes((15 << 3 | 0, 1))  # field 15, a varint
    return AnyValue.FromString(unknown + value.SerializeToString())


@pytest.mark.parametrize("value", VALUES + [_with_unknown_field_first(v) for v in VALUES])
def test_a_value_reads_as_value_of_reads_it_and_a_string_as_its_bytes(value: AnyValue) -> None:
    attrs = _attributes([KeyValue(key="k", value=value)])
    expected = value_of(value)
    assert attrs.get("k") == expected
    assert type(attrs.get("k")) is type(expected)
    encoded = encoded_of(value)
    if value.WhichOneof("value") == "string_value":
        assert encoded is not None
        assert encoded.text() == value.string_value
        assert bytes(encoded.piece(0, len(encoded))) == value.string_value.encode()
        fresh = _attributes([KeyValue(key="k", value=value)]).encoded("k")
        assert fresh is not None and fresh.text() == value.string_value
    else:
        assert encoded is None
        assert _attributes([KeyValue(key="k", value=value)]).encoded("k") is None


@given(st.lists(st.tuples(st.sampled_from("abc"), st.text(max_size=5)), max_size=8))
def test_a_key_written_twice_reads_as_its_last_value(pairs: list[tuple[str, str]]) -> None:
    attrs = _attributes([KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in pairs])
    expected = dict(pairs)
    assert sorted(attrs.shape()) == sorted(expected)  # each key once, in the map's order
    for key in "abcd":
        assert (key in attrs) == (key in expected)
        assert attrs.get(key) == expected.get(key)
        encoded = attrs.encoded(key)
        assert (encoded.text() if encoded is not None else None) == expected.get(key)


def test_events_in_span_order_with_their_attributes() -> None:
    span = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)))
    for n in range(3):
        event = span.events.add(name=f"e{n}", time_unix_nano=n + 10)
        event.attributes.add(key="at", value=AnyValue(int_value=n))
    view = SpanView(span, "scope", ResourceView(Resource()))
    assert [(e.position, e.name, e.time_unix_nano, e.attrs.get("at")) for e in view.events] == [
        (0, "e0", 10, 0),
        (1, "e1", 11, 1),
        (2, "e2", 12, 2),
    ]
    assert view.events is view.events
    assert SpanView(Span(), "scope", ResourceView(Resource())).events == []


def test_attribute_lists_of_one_shape_read_their_own_values() -> None:
    def attrs(*pairs: tuple[str, str]) -> Attributes:
        return _attributes([KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in pairs])

    first = attrs(("a", "1"), ("b", "2"), ("a", "3"))
    second = attrs(("a", "x"), ("b", "y"), ("a", "z"))
    other = attrs(("b", "q"), ("a", "r"))
    assert first.shape() == second.shape()
    assert sorted(first.shape()) == sorted(other.shape()) == ["a", "b"]
    assert [first.get("a"), first.get("b"), second.get("a"), second.get("b")] == ["3", "2", "z", "y"]
    assert [other.get("a"), other.get("b")] == ["r", "q"]
    encoded = second.encoded("a")
    assert encoded is not None and encoded.text() == "z"


_READS = st.lists(
    st.tuples(st.sampled_from(["get", "text", "encoded", "in", "shape", "keys"]), st.sampled_from("abcd")),
    max_size=12,
)
_VALUES = st.one_of(
    st.text(max_size=4).map(lambda v: AnyValue(string_value=v)),
    st.integers(-3, 3).map(lambda v: AnyValue(int_value=v)),
    st.just(AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="a")]))),
)


def _read(attrs: Attributes, how: str, key: str) -> object:
    if how == "get":
        return attrs.get(key)
    if how == "text":
        return attrs.text(key)
    if how == "encoded":
        encoded = attrs.encoded(key)
        return None if encoded is None else encoded.text()
    if how == "in":
        return key in attrs
    return attrs.shape() if how == "shape" else list(attrs.keys())


@given(st.lists(st.tuples(st.sampled_from("abc"), _VALUES), max_size=6), _READS)
def test_each_read_answers_as_on_attributes_not_read_before(
    pairs: list[tuple[str, AnyValue]], reads: list[tuple[str, str]]
) -> None:
    """A value read once (kept beside the map) reads the same, by every read,
    as on a fresh list: reads in any order answer alike."""
    kvs = [KeyValue(key=k, value=v) for k, v in pairs]
    attrs = _attributes(kvs)
    for how, key in reads:
        assert _read(attrs, how, key) == _read(_attributes(kvs), how, key), (how, key)


def _span(name: str, *keys: str) -> SpanView:
    span = Span(name=name, attributes=[KeyValue(key=k, value=AnyValue(string_value=k)) for k in keys])
    return SpanView(span, "scope", ResourceView(Resource()))


def test_spans_of_the_same_keys_share_one_shape_hashed_by_identity() -> None:
    first = _span("shape test", "s.a", "s.b", "s.c").attrs.shape()
    again = _span("shape test", "s.c", "s.a", "s.b").attrs.shape()  # the same keys: the shape found first
    assert again is first and sorted(first) == ["s.a", "s.b", "s.c"]
    assert hash(first) != hash(tuple(first)) and {first: 1}.get(tuple(first)) is None
    # As many keys under the same name, one of them another: a shape of its own.
    other = _span("shape test", "s.a", "s.b", "s.d").attrs.shape()
    assert sorted(other) == ["s.a", "s.b", "s.d"] and other is not first
    assert _span("shape test", "s.a", "s.b", "s.c").attrs.shape() is first
    # Fewer keys, another name, a resource's map: each its own keys.
    assert sorted(_span("shape test", "s.a", "s.b").attrs.shape()) == ["s.a", "s.b"]
    assert sorted(_span("another", "s.b", "s.a", "s.c").attrs.shape()) == ["s.a", "s.b", "s.c"]
    resource = ResourceView(Resource(attributes=[KeyValue(key="r.a", value=AnyValue(string_value="x"))]))
    same = classes.received(Resource(attributes=[KeyValue(key="r.a", value=AnyValue(int_value=1))]))
    assert resource.attrs.shape() == ("r.a",) and resource.attrs.shape() is shape_of(attribute_map(same))
