"""A remembered history is compared with a later one byte for byte: one byte changed anywhere
in what they would share (its bytes up to its array's end, in a buffer other histories may have
appended to since, and the bytes after its array) makes the later history read whole."""

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
def test_one_byte_changed_anywhere_in_the_shared_text_reads_the_history_whole(
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
