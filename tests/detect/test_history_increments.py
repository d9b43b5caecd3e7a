"""Chat histories are read incrementally: only the messages a session has not read yet.

Each chat span records the conversation so far; reading it whole each time costs the square
of a session's length.  These tests replay the real recordings with and without the
incremental reading and require the same sessions, and show that the recordings do exercise it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from support import FRAMEWORKS

from collector.config import parse
from collector.detect import histories, messages
from collector.detect.session import SessionEvidence
from collector.otlp.views import Encoded, ResourceView, SpanView, encoded_of
from collector.receiver.errors import ReceiveError
from collector.replay import replay, requests_in
from evaluators.evidence import Session

RECORDINGS = sorted(str(p) for p in FRAMEWORKS.glob("*/*.jsonl"))


def _sessions() -> list[Session]:
    outcome = asyncio.run(replay(RECORDINGS, parse({})))
    assert not outcome.problems
    return sorted((c.session for c in outcome.coverages), key=lambda s: (s.session_id, s.revision))


def _histories_cut() -> list[tuple[int, int]]:
    """(history length, unread part length) for each recorded history read incrementally."""
    cut: list[tuple[int, int]] = []
    for path in RECORDINGS:
        evidence = SessionEvidence()
        for _, received in requests_in(Path(path)):
            if isinstance(received, ReceiveError) or received.signal != "traces":
                continue
            for resource_spans in received.request.resource_spans:
                resource = ResourceView(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        view = SpanView(span, scope_spans.scope.name, resource)
                        for role, raw in messages.prompt_fields(view):
                            part = (
                                evidence.histories.unread_part(raw, role)
                                if isinstance(raw, Encoded)
                                else None
                            )
                            if part is not None:
                                cut.append((len(raw), len(part.encode())))
    return cut


def _unread(evidence: SessionEvidence, text: str) -> str:
    """What ``evidence`` reads of ``text``: the unread part, or all of it."""
    part = evidence.histories.unread_part(Encoded.of(text), "messages")
    return text if part is None else part


def test_reading_histories_incrementally_detects_exactly_what_reading_them_whole_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    incremental = _sessions()
    monkeypatch.setattr(histories, "REMEMBERED", 0)  # remember none: every history is read whole
    whole = _sessions()
    assert not _histories_cut()

    assert len(incremental) == len(whole) > 50
    assert incremental == whole
    # The real recordings take the incremental path, and it reads less.
    monkeypatch.undo()
    shortened = _histories_cut()
    assert len(shortened) >= 10, shortened
    assert all(part < full for full, part in shortened)


_SIZE = 65_536
_LONG = json.dumps([{"m": "x" * 1000, "n": n} for n in range(4 * _SIZE // 1000)])  # ~256 KB
# One message changed far from either end, within the window the first continuation compares
# (``histories.History.window``; changed elsewhere: tests/detect/test_history_bytes.py).
_AT = _LONG.index("x", _SIZE // 4)
_REWRITTEN = _LONG[:_AT] + "y" + _LONG[_AT + 1 :]
# Text that Python stores two bytes a character (an em dash, as JSON writers keep it unescaped).
_WIDE = json.dumps(
    [{"m": "\u2014" + "x" * 1000, "n": n} for n in range(4 * _SIZE // 1000)], ensure_ascii=False
)
_WIDE_REWRITTEN = _WIDE[:_AT] + "y" + _WIDE[_AT + 1 :]
_ADK = json.dumps(
    {
        "model": "m",
        "config": {"system_instruction": "s"},
        "contents": [{"role": "user", "parts": [{"text": "a"}]}],
    }
)
_ADK_TS = json.dumps(
    {
        "model": "m",
        "contents": [{"role": "user", "parts": [{"text": "a"}]}],
        "config": {"tools": [{"x": "],"}]},
    }
)
# The key after the history also inside a message, and inside the value after it.
_GRAPH = json.dumps({"messages": [{"x": [1], "y": {}}], "y": {"z": [1], "y": 2}})
# The same as a compact writer writes it (the keys after it written as orjson writes them).
_GRAPH_COMPACT = json.dumps(json.loads(_GRAPH), separators=(",", ":"))


@pytest.mark.parametrize(
    ("earlier", "later", "unread"),
    [
        ('[{"a": 1}]', '[{"a": 1}, {"b": 2}]', [{"b": 2}]),
        ('[{"a": 1}]', '[{"a": 1},{"b": 2},{"c": 3}]', [{"b": 2}, {"c": 3}]),
        ('[{"a": 1}]', '[{"a": 2}, {"b": 2}]', [{"a": 2}, {"b": 2}]),  # rewritten: read whole
        ('[{"a": [1]}]', '[{"a": [1, 2]}]', [{"a": [1, 2]}]),  # grew inside: read whole
        ('[{"a": 1}]', '[{"a": 1}\n, {"b": 2}]', [{"a": 1}, {"b": 2}]),  # not a continuation
        ("[]", '[{"a": 1}]', [{"a": 1}]),
        # Long: continued, and rewritten far from either end.
        (_LONG, _LONG[:-1] + ', {"b": 2}]', [{"b": 2}]),
        (_LONG, _REWRITTEN[:-1] + ', {"b": 2}]', [*json.loads(_REWRITTEN), {"b": 2}]),
        # Not ASCII: continued, rewritten, and continued with the first wide character.
        (_WIDE, _WIDE[:-1] + ', {"b": "\u2014"}]', [{"b": "\u2014"}]),
        (_WIDE, _WIDE_REWRITTEN[:-1] + ', {"b": 2}]', [*json.loads(_WIDE_REWRITTEN), {"b": 2}]),
        (_LONG, _LONG[:-1] + ', {"b": "\u2014"}]', [{"b": "\u2014"}]),
        (_LONG, _REWRITTEN[:-1] + ', {"b": "\u2014"}]', [*json.loads(_REWRITTEN), {"b": "\u2014"}]),
        # An object holding the history under its first history key (prompt_facts.HISTORY_KEYS):
        # last (Google ADK's llm_request), or before other keys (ADK TypeScript, LangGraph).
        (_ADK, _ADK[:-2] + ', {"role": "model"}]}', [{"role": "model"}]),
        (_ADK_TS, _ADK_TS.replace('"}]}], ', '"}]}, {"b": 2}], '), [{"b": 2}]),
        (_GRAPH, _GRAPH.replace("}], ", '}, {"b": 2}], ', 1), [{"b": 2}]),
        # The keys after it changed, or a message grew inside: read whole.
        (_GRAPH, _GRAPH.replace("}], ", '}, {"b": 2}], ', 1).replace('"y": 2', '"y": 3'), None),
        ('{"messages": [{"parts": [1]}]}', '{"messages": [{"parts": [1, 2]}]}', None),
        (_GRAPH_COMPACT, _GRAPH_COMPACT.replace("}],", '},{"b":2}],', 1), [{"b": 2}]),
        (_GRAPH_COMPACT, _GRAPH_COMPACT.replace("}],", '},{"b":2}],', 1).replace('"y":2', '"y":3'), None),
        ('{"messages":[{"a":1}],"n":null}', '{"messages":[{"a":1},{"b":2}],"n":null}', [{"b": 2}]),
        # Keys after it that equal no value read back (NaN): never remembered, read whole.
        ('{"messages":[{"a":1}],"n":NaN}', '{"messages":[{"a":1},{"b":2}],"n":NaN}', None),
        # No history under its keys: read whole each time.
        ('{"other": [1]}', '{"other": [1, 2]}', None),
    ],
)
def test_only_a_continuation_of_a_history_is_cut(
    earlier: str, later: str, unread: list[object] | None
) -> None:
    evidence = SessionEvidence()
    assert json.loads(_unread(evidence, earlier)) == json.loads(earlier)
    assert json.loads(_unread(evidence, later)) == (json.loads(later) if unread is None else unread)


def test_a_continuation_is_remembered_without_copying_the_text_it_shares() -> None:
    evidence = SessionEvidence()
    history = _LONG
    for n in range(3):
        _unread(evidence, history)
        history = history[:-1] + f', {{"turn": {n}, "m": "{"z" * 4_000}"}}]'
    newest, older = evidence.histories.by_reader["messages"][:2]
    assert (
        bytes(newest.buffer[: newest.end]) == history[: history.rindex(", {")].encode()
    )  # up to its bracket
    assert newest.buffer is older.buffer and newest.end > older.end  # one buffer, appended to


def test_a_continuation_is_compared_as_bytes_and_only_its_new_part_is_decoded() -> None:
    evidence = SessionEvidence()
    first = encoded_of(AnyValue(string_value=_WIDE))
    assert first is not None and evidence.histories.unread_part(first, "messages") is None  # read whole
    later = encoded_of(AnyValue(string_value=_WIDE[:-1] + ', {"b": "\u2014"}]'))
    assert later is not None
    part = evidence.histories.unread_part(later, "messages")
    assert part is not None and json.loads(part) == [{"b": "\u2014"}]
    assert later._text is None  # what it shares with the first was never made a str


def test_a_string_value_is_read_as_its_utf8_bytes_and_made_text_only_on_request() -> None:
    text = "caf\u00e9 \u2014 " + "x" * 200  # over 127 bytes: a length of two bytes
    value = AnyValue(string_value=text)
    raw = encoded_of(value)
    assert raw is not None and raw._text is None
    assert len(raw) == len(text.encode()) and raw.text() == text
    assert raw.text_from(len("caf\u00e9 ".encode())) == text[len("caf\u00e9 ") :]
    # A field of a later OTLP, kept by protobuf as unknown, before or after: not in the text.
    unknown = b"\x78\x01"  # field 15, a varint
    for body in (value.SerializeToString() + unknown, unknown + value.SerializeToString()):
        later = AnyValue()
        later.ParseFromString(body)
        found = encoded_of(later)
        assert found is not None and found.text() == text
    empty = encoded_of(AnyValue(string_value=""))
    assert empty is not None and len(empty) == 0 and empty.text() == ""
    assert encoded_of(AnyValue(int_value=3)) is None
    assert encoded_of(AnyValue()) is None


def test_what_one_reader_has_read_is_still_unread_for_another() -> None:
    """A log record's content gives no user turns where a span's messages do: a history a
    log record read is read whole by the next span, then continued."""
    evidence = SessionEvidence()
    earlier, later = '[{"a": 1}]', '[{"a": 1}, {"b": 2}]'
    assert evidence.histories.unread_part(Encoded.of(earlier), "log") is None
    assert evidence.histories.unread_part(Encoded.of(later), "messages") is None
    assert json.loads(_unread(evidence, later[:-1] + ', {"c": 3}]')) == [{"c": 3}]
    assert json.loads(evidence.histories.unread_part(Encoded.of(later), "log") or "") == [{"b": 2}]


def test_text_that_is_not_a_json_array_is_read_as_it_is() -> None:
    evidence = SessionEvidence()
    for raw in ('{"messages": [1]}', "[not json]", "plain text", '[{"a": 1}] '):
        assert evidence.histories.unread_part(Encoded.of(raw), "messages") is None


def test_json_text_reads_as_the_standard_library_reads_it() -> None:
    """``parse_json`` reads with orjson first; where orjson refuses what ``json`` accepts, the
    value must still be ``json``'s, and text that is not JSON still reads as None."""
    import json
    import math

    from collector.detect.content import parse_json

    for text in ('{"a": [1, 2.5, "x"], "a": true}', '["\\ud83d\\ude00 ok"]', '"plain"', "[-0, 1e400]"):
        assert parse_json(text) == json.loads(text)
    # The one difference, accepted: orjson reads an integer over 64 bits as the nearest float.
    # Detectors read no numbers (they look for strings and blocks), only judge context would.
    assert parse_json('{"big": 123456789012345678901234567890}') == {"big": 1.2345678901234568e29}
    assert parse_json('["\\ud800 lone"]') == ["\ud800 lone"]
    assert math.isnan(parse_json('{"x": NaN}')["x"])
    for text in ("[INFO] not json", '{"unterminated": ', "{'single': 1}"):
        assert parse_json(text) is None
