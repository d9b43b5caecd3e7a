"""Span attribute strings read in place from the request bytes as received (``inplace``):
the same text as the parsed message holds, for every string of every recorded span, and the
same sessions when every recording is assembled reading in place."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from support import assembled_sessions, recorded_trace_requests

from collector.otlp import classes, inplace, wire
from collector.otlp.views import ResourceView, SpanView, attribute_map, encoded_of


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def test_span_ranges_frame_every_recorded_span_in_order() -> None:
    requests = recorded_trace_requests()
    assert len(requests) > 100
    for request, body in requests:
        ranges = list(inplace.span_ranges(body))
        assert [classes.Span.FromString(body[start:end]) for start, end in ranges] == spans_of(request)


def test_every_recorded_string_reads_the_same_in_place() -> None:
    strings = 0
    for request, body in recorded_trace_requests():
        for span, (start, end) in zip(spans_of(request), inplace.span_ranges(body), strict=True):
            place = inplace.SpanBytes(body, start, end, span.trace_id, span.span_id)
            values = attribute_map(span)  # each key once (a map)
            for key in values:
                where = place.string(key)
                parsed = encoded_of(values[key])
                if parsed is None:
                    assert where is None, key
                    continue
                assert where is not None, key
                assert body[where[0] : where[1]] == parsed.piece(0, len(parsed)), key
                strings += 1
    assert strings > 1000


def test_a_span_whose_ids_differ_is_not_read_in_place() -> None:
    request, body = next((r, b) for r, b in recorded_trace_requests() if len(spans_of(r)) > 1)
    first, second = spans_of(request)[:2]
    start, end = next(inplace.span_ranges(body))
    values = attribute_map(first)
    key = sorted(key for key in values if values[key].WhichOneof("value") == "string_value")[0]  # a string's
    assert inplace.SpanBytes(body, start, end, first.trace_id, first.span_id).string(key) is not None
    assert inplace.SpanBytes(body, start, end, second.trace_id, second.span_id).string(key) is None


def _one_span(attributes: list[tuple[str, str]]) -> tuple[ExportTraceServiceRequest, bytes]:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"t" * 16, b"s" * 8, "chat"
    for key, value in attributes:
        kv = span.attributes.add()
        kv.key, kv.value.string_value = key, value
    return request, request.SerializeToString()


def test_a_key_written_twice_reads_its_last_value_from_the_parsed_message() -> None:
    request, body = _one_span([("history", "first"), ("history", "last")])
    (span,) = spans_of(request)
    ((start, end),) = inplace.span_ranges(body)
    view = SpanView(span, "", ResourceView(request.resource_spans[0].resource), inplace.SpanBytes(body, start, end, span.trace_id, span.span_id))
    encoded = view.attrs.encoded("history")
    assert encoded is not None and encoded.text() == "last"


def test_a_key_written_twice_is_not_read_in_place() -> None:
    """The parsed span holds a key written twice once, with its last value (a map): the bytes
    in place are not taken for either, so its reader reads the map's."""
    request, body = _one_span([("history", "first"), ("other", "x" * 5000), ("history", "last")])
    (span,) = spans_of(request)
    ((start, end),) = inplace.span_ranges(body)
    place = inplace.SpanBytes(body, start, end, span.trace_id, span.span_id)
    other = place.string("other")
    assert other is not None and body[other[0] : other[1]] == b"x" * 5000
    assert place.string("history") is None


def test_text_that_is_not_utf8_reads_as_the_repaired_message_does() -> None:
    _, body = _one_span([("history", "[" + "x" * 40 + "AB" + "]")])
    body = body.replace(b"xAB]", b"x\xff\xfe]")  # bytes no UTF-8 decoder reads
    request = ExportTraceServiceRequest()
    assert wire.parse(request, body)  # repaired: U+FFFD for each bad sequence
    (span,) = spans_of(request)
    ((start, end),) = inplace.span_ranges(body)
    view = SpanView(span, "", ResourceView(request.resource_spans[0].resource), inplace.SpanBytes(body, start, end, span.trace_id, span.span_id))
    encoded = view.attrs.encoded("history")
    assert encoded is not None and encoded.data is body  # read in place, not copied
    assert encoded.text() == span.attributes[0].value.string_value
    assert "\ufffd" in encoded.text()


def test_every_recording_assembles_to_the_same_sessions_read_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    requests = recorded_trace_requests()
    parsed = assembled_sessions(requests, raw=False)
    read = {"in place": 0}
    string = inplace.SpanBytes.string

    def counted(self: inplace.SpanBytes, key: str) -> tuple[int, int] | None:
        where = string(self, key)
        read["in place"] += where is not None
        return where

    monkeypatch.setattr(inplace, "MIN_AVERAGE_SPAN_BYTES", 0)  # every request, whatever its size
    monkeypatch.setattr(inplace.SpanBytes, "string", counted)
    assert assembled_sessions(requests, raw=True) == parsed
    # Histories, prompts and answers (727 strings in the recordings); short values of keys no
    # table names are read as text, not in place.
    assert read["in place"] > 500


def test_a_long_string_found_is_not_searched_again_for_another_key() -> None:
    """A key written inside a long string, framed exactly as a span attribute, is not taken for
    the attribute once that string was found: a later key is looked for around it."""
    inner = _one_span([("model", "fake")])[1]
    framed = inner[inner.index(b"J") :]  # the attribute as written: tag 9, length, key, value
    history = "[" + "x" * inplace.SKIPPED_FROM + framed.decode() + "]"
    request, body = _one_span([("history", history), ("model", "real")])
    (span,) = spans_of(request)
    ((start, end),) = inplace.span_ranges(body)
    place = inplace.SpanBytes(body, start, end, span.trace_id, span.span_id)
    where = place.string("history")
    assert where is not None and body[where[0] : where[1]].decode() == history
    model = place.string("model")
    assert model is not None and body[model[0] : model[1]] == b"real"
    # Asked again, each key reads the same.
    assert place.string("history") == where and place.string("model") == model


def test_strings_of_every_length_size_read_in_place() -> None:
    """Attribute, value and string lengths of one to four bytes (up to 3 MB), each key
    before and after the longer strings."""
    sizes = [0, 10, 127, 128, 200, 16_383, 16_384, 20_000, 2_097_152, 3_000_000]
    attributes = [(f"k{size}", "\u2014" * (size // 3) + "x" * (size % 3)) for size in sizes]
    request, body = _one_span([*attributes, ("after", "last")])
    (span,) = spans_of(request)
    ((start, end),) = inplace.span_ranges(body)
    for order in (attributes, attributes[::-1]):
        place = inplace.SpanBytes(body, start, end, span.trace_id, span.span_id)
        for key, text in [*order, ("after", "last")]:
            where = place.string(key)
            assert where is not None and body[where[0] : where[1]] == text.encode(), key


def test_a_long_key_is_looked_for_in_place_but_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inplace, "_KEY_FIELDS", {})
    long_key = "k" * 10_000  # a key of the telemetry's
    assert inplace._key_field(long_key).endswith(long_key.encode())
    assert inplace._key_field("gen_ai.input.messages").endswith(b"gen_ai.input.messages")
    assert list(inplace._KEY_FIELDS) == ["gen_ai.input.messages"]
