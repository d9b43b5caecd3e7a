"""The narrow schema the assembler reads spans with, checked against the full OTLP classes
on every span the real frameworks recorded, and on encodings no SDK here produces."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support import FRAMEWORKS, pb_field, pb_varint, trace_requests

from collector.sessions import keys
from collector.spans import value_of


def _recorded_requests() -> list[Any]:
    return [
        request for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")) for request in trace_requests(path)
    ]


def test_every_recorded_attribute_reads_the_same_as_with_the_full_classes() -> None:
    spans = 0
    for request in _recorded_requests():
        narrow = keys.TraceRequest.FromString(request.SerializeToString())
        for full_rs, narrow_rs in zip(request.resource_spans, narrow.resource_spans, strict=True):
            resource = {kv.key: value_of(kv.value) for kv in full_rs.resource.attributes}
            assert keys.picked(narrow_rs.resource.attributes, resource) == resource
            for full_ss, narrow_ss in zip(full_rs.scope_spans, narrow_rs.scope_spans, strict=True):
                assert narrow_ss.scope.name == full_ss.scope.name
                for full, span in zip(full_ss.spans, narrow_ss.spans, strict=True):
                    expected = {kv.key: value_of(kv.value) for kv in full.attributes}
                    assert (span.trace_id, span.span_id) == (full.trace_id, full.span_id)
                    assert keys.picked(span.attributes, [*expected, "absent.key"]) == expected
                    one = next(iter(expected), None)  # only what is asked for is decoded
                    if one is not None:
                        assert keys.picked(span.attributes, [one]) == {one: expected[one]}
                    spans += 1
    assert spans > 100


def _span(*attributes: bytes) -> Any:
    """A narrow span holding these encoded ``KeyValue`` messages as its attributes."""
    span_bytes = b"".join(pb_field(9, kv) for kv in attributes)
    request = pb_field(1, pb_field(2, pb_field(2, span_bytes)))  # resource_spans / scope_spans / spans
    (span,) = keys.TraceRequest.FromString(request).resource_spans[0].scope_spans[0].spans
    return span



def test_a_key_written_after_its_value_is_still_found() -> None:
    # Protobuf allows fields in any order; no SDK here writes the value first, so build it.
    value = AnyValue(string_value="s-1").SerializeToString()
    value_first = b"\x12" + bytes([len(value)]) + value + b"\x0a\x0asession.id"
    assert KeyValue.FromString(value_first).key == "session.id"
    normal = KeyValue(key="other", value=AnyValue(int_value=3)).SerializeToString()
    span = _span(normal, value_first, b"")
    assert keys.picked(span.attributes, ["session.id", "other"]) == {"session.id": "s-1", "other": 3}


def test_a_repeated_key_keeps_its_last_value_as_the_full_classes_read_it() -> None:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from collector.sessions.assembler import _picked  # the inline path's reading

    first = KeyValue(key="session.id", value=AnyValue(string_value="a"))
    last = KeyValue(key="session.id", value=AnyValue(string_value="b"))
    full = Span(attributes=[first, last])
    narrow = _span(first.SerializeToString(), last.SerializeToString())
    assert keys.picked(narrow.attributes, ["session.id"]) == _picked(full.attributes, frozenset({"session.id"}))
    assert keys.picked(narrow.attributes, ["session.id"]) == {"session.id": "b"}


def test_long_keys_and_empty_values() -> None:
    long_key = KeyValue(key="k" * 200, value=AnyValue(string_value="x")).SerializeToString()
    no_value = KeyValue(key="session.end").SerializeToString()
    span = _span(long_key, no_value)
    assert keys.picked(span.attributes, ["k" * 200, "session.end", "k" * 127]) == {
        "k" * 200: "x",
        "session.end": None,
    }


@pytest.mark.parametrize(
    "value",
    [
        AnyValue(string_value="").SerializeToString(),
        AnyValue(string_value="s" * 127).SerializeToString(),  # one length byte
        AnyValue(string_value="é" * 100).SerializeToString(),  # two
        AnyValue(string_value="s" * 20_000).SerializeToString(),  # three: the full class reads it
        AnyValue(string_value="a").SerializeToString() + AnyValue(string_value="b").SerializeToString(),
        AnyValue(string_value="a").SerializeToString() + AnyValue(int_value=7).SerializeToString(),
        AnyValue(int_value=7).SerializeToString(),
        b"\x0a\x02\xff\xfe",  # not UTF-8
        b"\x0a\x05ab",  # shorter than it says
        b"\x0a\x81",  # a length cut off
    ],
)
def test_a_session_key_value_reads_as_the_full_class_reads_it(value: bytes) -> None:
    # ``picked`` reads a lone string field itself; every other encoding goes to the full class.
    span = _span(b"\x0a\x0asession.id\x12" + pb_varint(len(value)) + value)
    try:
        expected: Any = value_of(AnyValue.FromString(value))
    except DecodeError as err:
        with pytest.raises(DecodeError):
            keys.picked(span.attributes, ["session.id"])
        assert str(err)
        return
    assert keys.picked(span.attributes, ["session.id"]) == {"session.id": expected}


class _Placements:
    """A detection stage that only notes where the assembler put each span."""

    def __init__(self, reads_spans: bool) -> None:
        self.reads_spans = reads_spans
        self.placed: list[tuple[str, int]] = []
        self.closed: list[tuple[str, int, str]] = []

    def begin(self, signal: str, request: Any, raw: bytes | None) -> _Placements:
        return self

    def resource(self, resource: Any, attrs: Any = None) -> None:
        pass

    def span(self, key: str, index: int, span: Any, scope: str, attrs: Any = None, events: Any = None) -> None:
        self.placed.append((key, index))

    def end(self) -> None:
        pass

    def fold(self, provisional: str, into: str) -> None:
        self.placed.append((f"fold {provisional}", 0))

    def finish(self, key: str, revision: int, reason: str, keep: bool) -> None:
        self.closed.append((key, revision, reason))

    def reopen(self, key: str) -> None:
        pass

    def forget(self, key: str) -> None:
        pass


def test_the_assembler_places_spans_alike_reading_either_schema() -> None:
    """The full request (detection inline), the C scanner (detection in a worker), and the
    narrow schema (a worker, in a pure-Python install) place every span alike."""
    from collector.config import parse
    from collector.sessions.assembler import Accepted, Assembler

    outcomes = []
    for reads_spans, scanner in ((True, False), (False, True), (False, False)):
        stage = _Placements(reads_spans)
        assembler = Assembler(parse({}).sessions, lambda session, reason: None, detection=stage)  # type: ignore[arg-type]
        if not scanner:
            assembler._scanner = None
        elif assembler._scanner is None:
            continue  # a pure-Python install: no scanner to compare
        for n, request in enumerate(_recorded_requests()):
            for _ in assembler.feed(request, n + 1, Accepted(), raw=request.SerializeToString()):
                pass
        assembler.close_all()
        outcomes.append((stage.placed, stage.closed))
    assert all(outcome == outcomes[0] for outcome in outcomes[1:])
    placed, closed = outcomes[0]
    assert len(placed) > 100 and len(closed) == len({key for key, _ in placed}) > 20
