"""The C scanner (``collector/wire_scan.c``) against the full OTLP classes: on every span the
real frameworks recorded, on encodings no SDK here writes, and on broken input, where it must
step aside (None) rather than raise or guess."""

from __future__ import annotations

import random
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support import FRAMEWORKS, pb_field, trace_requests

import collector.detect  # noqa: F401 - declares the keys the views read
from collector import spans
from collector.sessions import keys
from collector.spans import _event_fields, _event_values, _keys, _prefixes, scan, scanned_values, value_of

pytestmark = pytest.mark.skipif(
    spans.wire_scan is None,
    reason="a pure-Python install has no C scanner (tests/test_interpreted.py covers that mode)",
)
RESOURCE_KEYS = ("service.name", "session.id")


def _recorded() -> list[ExportTraceServiceRequest]:
    return [r for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")) for r in trace_requests(path)]


def _declared(key: str) -> bool:
    return key in _keys or key.startswith(_prefixes)


def _as_classes_read_it(request: ExportTraceServiceRequest) -> list[Any]:
    """Per span: ids, declared values, whether a prefixed key was found, declared event fields."""
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                values = {kv.key: value_of(kv.value) for kv in span.attributes if _declared(kv.key)}
                prefixed = any(k not in _keys for k in values)
                out.append((span.trace_id, span.span_id, values, prefixed, _event_values(span)))
    return out


def _as_scanned(raw: bytes) -> list[Any] | None:
    found = scan(raw)
    if found is None:
        return None
    out = []
    for _, trace_id, span_id, values, flags, events in found:
        indexed, fields = scanned_values(values, flags, events)
        out.append((trace_id, span_id, indexed, bool(flags & spans.wire_scan.PREFIXED), fields))
    return out


def test_every_recorded_span_reads_the_same_as_with_the_full_classes() -> None:
    requests = _recorded()
    total = with_events = 0
    for request in requests:
        expected = _as_classes_read_it(request)
        assert _as_scanned(request.SerializeToString()) == expected
        total += len(expected)
        with_events += sum(1 for *_, events in expected if events)
    assert total > 300 and with_events > 20  # the recordings reach the event path too


def test_every_recorded_resource_and_session_key_reads_the_same() -> None:
    scanner = keys.KeyScanner(["session.id", "gen_ai.conversation.id", "skillgauge.session.end"], RESOURCE_KEYS)
    for request in _recorded():
        found = scanner.scan(request.SerializeToString())
        assert found is not None
        resources, scanned = found
        assert resources == [
            {kv.key: value_of(kv.value) for kv in rs.resource.attributes if kv.key in RESOURCE_KEYS}
            for rs in request.resource_spans
        ]
        where = [n for n, rs in enumerate(request.resource_spans) for ss in rs.scope_spans for _ in ss.spans]
        assert [s[0] for s in scanned] == where
        for span, full in zip(scanned, (s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans), strict=True):
            wanted = {kv.key: value_of(kv.value) for kv in full.attributes if kv.key in ("session.id", "gen_ai.conversation.id", "skillgauge.session.end")}
            assert (keys.span_values(span) or {}) == wanted


# -- encodings no SDK here writes ------------------------------------------------------------



def _request(*span_fields: bytes, ids: bool = True) -> bytes:
    span = (pb_field(1, b"t" * 16) + pb_field(2, b"s" * 8) if ids else b"") + b"".join(span_fields)
    return pb_field(1, pb_field(2, pb_field(2, span)))


def _compare(raw: bytes) -> list[Any] | None:
    """The scanner's reading of ``raw``, asserted equal to the full classes' when it has one."""
    scanned = _as_scanned(raw)
    if scanned is not None:
        assert scanned == _as_classes_read_it(ExportTraceServiceRequest.FromString(raw))
    return scanned


def test_fields_in_any_order_and_keys_written_twice() -> None:
    value = AnyValue(string_value="s-1").SerializeToString()
    value_first = pb_field(2, value) + pb_field(1, b"session.id")  # a key after its value
    twice = KeyValue(key="tool.name", value=AnyValue(string_value="a")).SerializeToString()
    again = KeyValue(key="tool.name", value=AnyValue(string_value="b")).SerializeToString()
    ids_last = _request(pb_field(9, value_first), pb_field(9, twice), pb_field(9, again), ids=False)
    raw = pb_field(1, pb_field(2, pb_field(2, pb_field(9, value_first) + pb_field(1, b"t" * 16) + pb_field(2, b"s" * 8))))
    assert _compare(raw) == [(b"t" * 16, b"s" * 8, {"session.id": "s-1"}, False, [])]
    (span,) = _compare(ids_last) or []
    assert span[2] == {"session.id": "s-1", "tool.name": "b"}  # the last value written
    assert span[:2] == (b"", b"")  # no ids: the assembler rejects the span by its ids


@pytest.mark.parametrize(
    "value",
    [
        AnyValue(string_value="").SerializeToString(),
        AnyValue(string_value="é" * 100).SerializeToString(),
        AnyValue(string_value="s" * 20_000).SerializeToString(),  # a three-byte length
        AnyValue(string_value="a").SerializeToString() + AnyValue(string_value="b").SerializeToString(),
        AnyValue(string_value="a").SerializeToString() + AnyValue(int_value=7).SerializeToString(),
        AnyValue(int_value=-7).SerializeToString(),
        AnyValue(bool_value=True).SerializeToString(),
        AnyValue(double_value=0.5).SerializeToString(),
        AnyValue(bytes_value=b"\x00\xff").SerializeToString(),
        AnyValue(kvlist_value={"values": [KeyValue(key="k", value=AnyValue(int_value=1))]}).SerializeToString(),
        b"",  # no value at all
    ],
)
def test_every_kind_of_value_reads_as_the_full_class_reads_it(value: bytes) -> None:
    attribute = pb_field(1, b"gen_ai.tool.name") + pb_field(2, value)
    event = pb_field(2, b"gen_ai.user.message") + pb_field(3, pb_field(1, b"content") + pb_field(2, value))
    scanned = _compare(_request(pb_field(9, attribute), pb_field(11, event)))
    assert scanned is not None
    assert scanned[0][2] == {"gen_ai.tool.name": value_of(AnyValue.FromString(value))}


def test_prefixed_keys_and_event_fields_in_order() -> None:
    prefixed = pb_field(1, b"llm.input_messages.0.message.content") + pb_field(2, AnyValue(string_value="hi").SerializeToString())
    content = AnyValue(string_value="c").SerializeToString()
    user = pb_field(3, pb_field(1, b"content") + pb_field(2, content)) + pb_field(2, b"gen_ai.user.message")  # name last
    other = pb_field(2, b"not.declared") + pb_field(3, pb_field(1, b"content") + pb_field(2, content))
    scanned = _compare(_request(pb_field(9, prefixed), pb_field(11, other), pb_field(11, user)))
    assert scanned is not None
    (_, _, values, prefixed_found, events) = scanned[0]
    assert prefixed_found and values == {"llm.input_messages.0.message.content": "hi"}
    assert events == [(1, "gen_ai.user.message", "content", "c")]  # the event's position counts all events


@pytest.mark.parametrize(
    "raw",
    [
        b"\x0a\x05ab",  # shorter than it says
        b"\x0a\x81",  # a length cut off
        b"\x08\x01",  # resource_spans as a varint
        pb_field(1, b"\x0b\x0c"),  # a group
        pb_field(1, pb_field(2, pb_field(2, b"\x09\x01"))),  # a span's trace_id as fixed64
        pb_field(1, pb_field(2, pb_field(2, pb_field(9, b"\x08\x01")))),  # a key as a varint
        pb_field(1, pb_field(2, pb_field(2, pb_field(9, pb_field(1, b"llm.input_messages.\xff"))))),  # a prefixed key, not UTF-8
    ],
)
def test_input_it_does_not_expect_is_left_to_protobuf(raw: bytes) -> None:
    assert scan(raw) is None


def test_invalid_utf8_in_a_value_is_left_for_the_full_class_to_reject() -> None:
    raw = _request(pb_field(9, pb_field(1, b"gen_ai.tool.name") + pb_field(2, b"\x0a\x02\xff\xfe")))
    (span,) = scan(raw) or []
    assert span[3] == {"gen_ai.tool.name": b"\x0a\x02\xff\xfe"} and span[4] & spans.wire_scan.UNDECODED
    with pytest.raises(DecodeError):
        scanned_values(span[3], span[4], span[5])


def test_broken_requests_never_raise_and_never_disagree() -> None:
    """Every recorded request cut short and with bytes changed: the scanner returns None, or
    what the full classes read when they can parse it."""
    rng = random.Random(7)
    checked = agreed = 0
    for request in _recorded()[::3]:
        raw = request.SerializeToString()
        cuts = [raw[:n] for n in range(0, len(raw), max(1, len(raw) // 40))]
        flips = []
        for _ in range(40):
            data = bytearray(raw)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            flips.append(bytes(data))
        for data in cuts + flips:
            checked += 1
            scanned = _as_scanned_or_none(data)
            try:
                parsed = ExportTraceServiceRequest.FromString(data)
            except DecodeError:
                continue
            if scanned is not None:
                assert scanned == _as_classes_read_it(parsed)
                agreed += 1
    assert checked > 500 and agreed > 100


def _as_scanned_or_none(data: bytes) -> list[Any] | None:
    try:
        return _as_scanned(data)
    except DecodeError:  # a value left encoded that protobuf rejects, as it would have
        return None


def test_the_scanner_holds_no_reference_to_the_buffer_it_read() -> None:
    # The detection worker reads each request into one buffer it reuses.
    raw = bytearray(_recorded()[0].SerializeToString())
    before = _as_scanned(bytes(raw))
    found = scan(memoryview(raw))
    raw[:] = bytes(len(raw))
    assert found is not None and before is not None
    assert [(t, s) for _, t, s, *_ in found] == [(t, s) for t, s, *_ in before]


def test_the_flags_python_reads_are_the_scanners() -> None:
    assert (spans.PREFIXED, spans.UNDECODED) == (spans.wire_scan.PREFIXED, spans.wire_scan.UNDECODED)


def test_declared_event_fields_fit_the_scanner() -> None:
    # Eight fields per event name at most (collector/wire_scan.c); more would need a change there.
    assert max(len(v) for v in _event_fields.values()) <= 8


def test_the_worker_finds_undeclared_keys_in_the_attributes_it_did_not_parse() -> None:
    # With the scanner, the worker parses spans with their attributes left encoded; a key no
    # detector declared (a deployment's own session key, say) is still found, and read alike.
    from collector.detect.child import items_of
    from collector.spans import Attributes

    checked = 0
    for request in _recorded()[::2]:
        _, items, scanned = items_of("traces", request.SerializeToString())
        assert scanned is not None
        full_spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        for (item, _, _), entry, full in zip(items, scanned, full_spans, strict=True):
            indexed, _ = scanned_values(entry[3], entry[4], entry[5])
            attrs = Attributes(item.attributes, indexed, bool(entry[4] & spans.wire_scan.PREFIXED))
            expected = {kv.key: value_of(kv.value) for kv in full.attributes}
            assert set(attrs.keys()) == set(expected)
            assert {key: attrs.get(key) for key in expected} == expected
            assert attrs.get("not.there") is None and "not.there" not in attrs
            checked += len(expected)
    assert checked > 1000
