"""A remembered history is compared with a later one byte for byte: one byte changed anywhere
in what they would share (its pieces, shared or merged, and the bytes after its array) makes
the later history read whole, however the remembered one was built."""

from __future__ import annotations

import itertools
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
def test_one_byte_changed_anywhere_in_the_shared_text_reads_the_history_whole(
    monkeypatch: pytest.MonkeyPatch, shape: object
) -> None:
    monkeypatch.setattr(histories, "CHUNK", 64)  # whole pieces, merged pieces and a new one
    monkeypatch.setattr(histories, "REMEMBERED", 1)  # only the newest: nothing else to continue
    turns = len(_MESSAGES) - 1
    read = _read_in_turns(shape, turns)
    (remembered,) = read.by_reader["messages"]
    assert len(remembered.chunks) > 3 and len({len(c) for c in remembered.chunks}) > 1
    later = shape(_MESSAGES)  # type: ignore[operator]
    added = json.dumps(_MESSAGES[turns:], ensure_ascii=False)
    assert json.loads(_copy(read).unread_part(Encoded(later), "messages") or "") == json.loads(added)
    shared = list(range(remembered.end)) + list(range(len(later) - len(remembered.tail), len(later)))
    for at in shared:
        changed = bytearray(later)
        changed[at] = ord("x") if later[at] != ord("x") else ord("y")
        assert _copy(read).unread_part(Encoded(bytes(changed)), "messages") is None, at


def test_a_continuation_copies_what_it_adds_and_keeps_few_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(histories, "CHUNK", 256)
    read = Histories()
    messages: list[object] = []
    before: list[bytes] = []
    for n in range(300):
        messages.append({"n": n, "text": "x" * (n * 7 % 41)})
        read.unread_part(Encoded(_array(messages)), "messages")
        newest = read.by_reader["messages"][0].chunks
        assert b"".join(newest) == _array(messages)[:-1]  # up to its bracket
        if before:  # the pieces of the one it continues, but for the newest small ones merged
            kept = len(newest) - 1
            assert all(a is b for a, b in zip(newest[:kept], before, strict=False))
            assert all(len(merged) < histories.CHUNK for merged in before[kept:])
        small = [len(piece) for piece in newest if len(piece) < histories.CHUNK]
        assert newest[-len(small) or len(newest) :] == [p for p in newest if len(p) < histories.CHUNK]
        assert all(bigger >= 2 * smaller for bigger, smaller in itertools.pairwise(small))
        assert len(small) <= histories.CHUNK.bit_length()
        before = newest
