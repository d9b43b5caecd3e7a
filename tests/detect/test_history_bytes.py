"""A remembered history is compared with a later one as bytes.  Up to
``histories.COMPARED_WHOLE`` bytes, one byte changed anywhere in what they would share (its
bytes up to its array's end, in a buffer other histories may have appended to since, and the
bytes after its array) makes the later history read whole.  A longer one is compared in its
ends and a window: a change of length, or in the ends, is read at once; a byte changed in place
anywhere is read within ``histories.WINDOWS`` + 2 continuations that carry it."""

from __future__ import annotations

import json

import pytest

from collector.detect import histories
from collector.detect.histories import Histories
from collector.otlp.views import Encoded

# Messages of uneven sizes, one not ASCII: continuations add pieces that merge with the
# newest ones and pieces that stay apart.
_MESSAGES = [{"role": "user", "n": n, "text": "\u2014" * (n % 3) + "x" * (7 * n % 23)} for n in range(12)]


def _array(messages: list[object]) -> bytes:
    return json.dumps(messages, ensure_ascii=False).encode()


def _held(messages: list[object]) -> bytes:
    """An object holding the history under ``messages``, with keys after it."""
    return json.dumps(
        {"messages": messages, "config": {"tools": ["],"]}, "model": "m"}, ensure_ascii=False
    ).encode()


def _read_in_turns(shape: object, turns: int) -> Histories:
    """What a session remembers after reading the history of each of ``turns`` turns."""
    read = Histories()
    for turn in range(1, turns + 1):
        read.unread_part(Encoded(shape(_MESSAGES[:turn])), "messages")  # type: ignore[operator]
    return read


def _copy(read: Histories) -> Histories:
    copied = Histories()
    copied.by_reader = {reader: list(remembered) for reader, remembered in read.by_reader.items()}
    return copied


@pytest.mark.parametrize("shape", [_array, _held], ids=["array", "object holding it"])
@pytest.mark.parametrize(
    "appended", [False, True], ids=["newest in its buffer", "its buffer appended to since"]
)
def test_one_byte_changed_anywhere_in_a_short_shared_text_reads_the_history_whole(
    monkeypatch: pytest.MonkeyPatch, shape: object, appended: bool
) -> None:
    monkeypatch.setattr(histories, "REMEMBERED", 1)  # only the newest: nothing else to continue
    turns = len(_MESSAGES) - 1
    read = _read_in_turns(shape, turns)
    (remembered,) = read.by_reader["messages"]
    later = shape(_MESSAGES)  # type: ignore[operator]
    if appended:  # another reader of the same history continued it: its buffer holds more
        _copy(read).unread_part(Encoded(later), "messages")
        assert len(remembered.buffer) > remembered.end
    else:
        assert len(remembered.buffer) == remembered.end
    added = json.dumps(_MESSAGES[turns:], ensure_ascii=False)
    assert json.loads(_copy(read).unread_part(Encoded(later), "messages") or "") == json.loads(added)
    shared = list(range(remembered.end)) + list(range(len(later) - len(remembered.tail), len(later)))
    for at in shared:
        changed = bytearray(later)
        changed[at] = ord("x") if later[at] != ord("x") else ord("y")
        assert _copy(read).unread_part(Encoded(bytes(changed)), "messages") is None, at


def test_a_continuation_appends_what_it_adds_to_the_buffer_it_shares_and_a_fork_copies() -> None:
    read = Histories()
    messages: list[object] = []
    first = None
    for n in range(300):
        messages.append({"n": n, "text": "x" * (n * 7 % 41)})
        read.unread_part(Encoded(_array(messages)), "messages")
        newest = read.by_reader["messages"][0]
        assert newest.buffer[: newest.end] == _array(messages)[:-1]  # up to its bracket
        first = newest.buffer if first is None else first
        assert newest.buffer is first  # one buffer for the whole conversation
    # An earlier history continued otherwise: a buffer of its own; the others' bytes stay.
    kept = bytes(first)
    older = read.by_reader["messages"][2]
    fork = [*messages[:298], {"fork": True}]
    assert older.end == len(_array(messages[:298])) - 1
    assert json.loads(read.unread_part(Encoded(_array(fork)), "messages") or "") == [{"fork": True}]
    forked = read.by_reader["messages"][0]
    assert forked.buffer is not first and forked.buffer == _array(fork)[:-1]
    assert first == kept


def _long_turns(turns: int) -> list[bytes]:
    """The histories of a conversation of ``turns`` turns, the first already over
    ``COMPARED_WHOLE`` bytes (messages of uneven sizes, some not ASCII)."""
    messages: list[object] = [
        {"n": n, "text": "\u2014" * (n % 3) + "x" * (900 + 37 * n % 300)}
        for n in range(histories.COMPARED_WHOLE // 900 + 8)
    ]
    out = []
    for turn in range(turns):
        messages.append({"turn": turn, "text": "y" * 50})
        out.append(_array(messages))
    return out


def _changed(history: bytes, at: int) -> bytes:
    changed = bytearray(history)
    changed[at] = ord("x") if history[at] != ord("x") else ord("z")
    return bytes(changed)


def test_a_long_history_changed_in_its_ends_or_in_length_is_read_whole_at_once() -> None:
    first, later = _long_turns(2)
    assert len(first) > histories.COMPARED_WHOLE
    end = len(first) - 1  # the remembered history's bytes: up to its bracket
    ends = [*range(0, histories.EDGE, 97), *range(end - histories.EDGE, end, 97), end - 1]
    for at in ends:
        read = Histories()
        read.unread_part(Encoded(first), "messages")
        assert read.unread_part(Encoded(_changed(later, at)), "messages") is None, at
    # One byte inserted, or removed, anywhere before its end.
    for at in range(1000, end - histories.EDGE, 4093):
        for edited in (later[:at] + b" " + later[at:], later[:at] + later[at + 1 :]):
            read = Histories()
            read.unread_part(Encoded(first), "messages")
            assert read.unread_part(Encoded(edited), "messages") is None, at


def test_a_long_history_changed_in_place_anywhere_is_read_whole_within_windows_continuations() -> None:
    turns = _long_turns(4 * histories.WINDOWS)
    end = len(turns[0]) - 1
    for since in range(1, histories.WINDOWS + 1):  # the window the change first meets: any
        for near in range(histories.EDGE + since, end - histories.EDGE, 3067):
            at = turns[0].index(b"x", near)  # in a message's text: the history stays JSON
            read = Histories()
            for history in turns[:since]:  # read whole, then continued
                read.unread_part(Encoded(history), "messages")
            # Every later turn carries the byte changed at ``at``: it is read whole within
            # WINDOWS + 2 of them, then continued.
            parts = [read.unread_part(Encoded(_changed(later, at)), "messages") for later in turns[since:]]
            assert None in parts[: histories.WINDOWS + 2], (since, at)
            after = parts.index(None) + 1
            assert json.loads(parts[after] or "") == [{"turn": since + after, "text": "y" * 50}], at


def test_a_long_continuation_reads_only_what_it_adds() -> None:
    turns = _long_turns(3 * histories.WINDOWS)
    read = Histories()
    assert read.unread_part(Encoded(turns[0]), "messages") is None
    for turn, later in enumerate(turns[1:], 1):
        part = read.unread_part(Encoded(later), "messages")
        assert json.loads(part or "") == [{"turn": turn, "text": "y" * 50}], turn


def test_a_long_conversation_that_forks_continues_the_history_it_forks_from() -> None:
    turns = _long_turns(4)
    read = Histories()
    for history in turns:
        read.unread_part(Encoded(history), "messages")
    # A retry from two turns back: the newest histories differ at their ends, the one it
    # continues is compared in their windows too, where it holds the same bytes.
    fork = turns[1][:-1] + b', {"fork": true}]'
    assert json.loads(read.unread_part(Encoded(fork), "messages") or "") == [{"fork": True}]


def test_a_history_with_a_long_key_after_its_array_is_read_whole_and_leaves_no_pattern(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(histories, "_FOLLOWS", {})
    long_key = "k" * 100_000  # a key of the telemetry's: no pattern is made or kept for it
    read = Histories()
    for turn in range(1, 4):
        raw = json.dumps({"messages": _MESSAGES[:turn], long_key: 1}).encode()
        assert read.unread_part(Encoded(raw), "messages") is None  # read whole, every turn
    assert histories._FOLLOWS == {}
    short = Histories()
    short.unread_part(Encoded(json.dumps({"messages": _MESSAGES[:1], "model": "m"}).encode()), "messages")
    assert list(histories._FOLLOWS) == ["model"]  # a short key's pattern is kept, as before
