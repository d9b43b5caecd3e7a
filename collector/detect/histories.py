"""Message histories read before, so that a later one is read only for what it adds.

Each chat span records the whole conversation so far, so reading every history whole costs
the square of a session's length.  ``Histories.unread_part`` compares a history's bytes with
the few read before (per reader) and returns only the messages a continuation adds.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from collector.detect.content import parse_json
from collector.detect.facts import prompts as prompt_facts
from collector.otlp.views import Encoded


class History:
    """A message history read before: a JSON array, or an object holding one under its first
    history key (``prompt_facts.HISTORY_KEYS``).  Kept as its UTF-8 bytes up to the array's
    closing bracket (``end``: the first ``end`` bytes of ``buffer``), compared in place with a
    later history's bytes (``starts``), and the bytes from that bracket on (``tail``: "]" for
    an array).

    One that continues another appends what it adds to the other's buffer when nothing has
    been appended to it since (the common case: each turn continues the one before), so the
    buffers of a conversation's histories are one, each history its first ``end`` bytes:
    remembering a continuation copies what it adds, and comparing reads one buffer, not
    pieces of it.  Bytes are only ever appended to a buffer, so a history's bytes never
    change.  One that continues a history already continued (a conversation that forks)
    copies that history's bytes into a buffer of its own.

    ``window_at``: where the bytes besides its ends that ``starts`` compares in a long
    history begin (``window``); each continuation's window follows its predecessor's."""

    __slots__ = ("buffer", "end", "tail", "window_at")
    buffer: bytearray
    end: int
    tail: bytes
    window_at: int

    def __init__(self, raw: Encoded, end: int, before: History | None = None) -> None:
        self.end = end
        start = raw.start
        self.tail = raw.data[start + end : raw.end]
        data = memoryview(raw.data)
        self.window_at = 0
        if before is not None:
            after = before.window()[1]
            self.window_at = after if after < before.end else 0  # from the first byte again
        if before is not None and len(before.buffer) == before.end:  # ``raw`` continues ``before``
            self.buffer = before.buffer  # its bytes are first
            self.buffer += data[start + before.end : start + end]
        else:
            self.buffer = bytearray(data[start : start + end])

    def window(self) -> tuple[int, int]:
        """The bytes besides its ends that ``starts`` compares: a ``WINDOWS``-th of them,
        from ``window_at``."""
        end = self.end
        return self.window_at, min(end, self.window_at + -(-end // WINDOWS))

    def starts(self, raw: Encoded, differed: list[tuple[int, int]]) -> bool:
        """Whether ``raw``'s first ``self.end`` bytes are taken for this history's: compared
        whole up to ``COMPARED_WHOLE`` bytes; above, its first and last ``EDGE`` bytes, its
        ``window()`` and the windows in ``differed`` (compared by the caller in histories it
        found different), each as far as this history goes.  When they differ, its window is
        added to ``differed``.

        Text inserted or removed anywhere before the end shifts the last bytes, so every
        change of length is seen at once, and so is any change in the ends (where the newest
        messages and the system prompt are).  A change that keeps the length in between is
        seen by the continuation whose window holds it: a conversation's windows take its
        bytes in turn, all of them within ``WINDOWS`` + 2 continuations, and the history
        that shows it is read whole.  Comparing a long history whole reads both copies from
        memory, which is most of what a long session's span costs more than a short one's;
        the ends and a window read about a sixth of them (of 300 KB: 8 KB and 38 KB)."""
        end, buffer = self.end, self.buffer
        data, start, stop = raw.data, raw.start, raw.end
        if end <= COMPARED_WHOLE and len(buffer) == end:
            same = data.startswith(buffer, start, stop)  # compared where they sit
        else:
            with memoryview(buffer) as view:  # released at once: the buffer may grow after
                same = (
                    data.startswith(view[:end], start, stop)
                    if end <= COMPARED_WHOLE
                    else _same_in(data, start, stop, view, end, [self.window(), *differed])
                )
        if not same:
            differed.append(self.window())  # an older history holding those bytes differs there too
        return same


def _same_in(
    data: bytes, start: int, stop: int, view: memoryview, end: int, windows: list[tuple[int, int]]
) -> bool:
    """Whether ``data[start:stop]`` holds ``view``'s first and last ``EDGE`` bytes and its
    bytes in each of ``windows`` (up to ``end``) where ``view`` has them."""
    if not (
        data.startswith(view[end - EDGE : end], start + end - EDGE, stop)
        and data.startswith(view[:EDGE], start, stop)
    ):
        return False
    for low, high in windows:
        high = min(high, end)
        if low < high and not data.startswith(view[low:high], start + low, stop):
            return False
    return True


# A remembered history of up to this many bytes is compared whole; a longer one in its ends
# (``EDGE`` bytes each) and a window of a ``WINDOWS``-th of it (``History.starts``).
COMPARED_WHOLE = 64 * 1024
EDGE = 4096
WINDOWS = 8


# The pattern of a history array's end followed by a key, for each key seen after one (a
# few: ``model``, ``config``, ...; bounded in number and length, as keys come from the
# telemetry: a history with a longer key after its array is read whole).
_FOLLOWS: dict[str, re.Pattern[bytes]] = {}
_FOLLOWS_KEPT = 256
_FOLLOWS_CHARS = 256


def _array_end(raw: Encoded, parsed: Any) -> int | None:
    """Where the message array of a history read whole closes in ``raw`` (``parsed``): its
    last byte for an array; for an object, the bracket that closes its first history key's
    array (a list), found where the rest of the object, parsed, is exactly the keys after
    it; None for anything else."""
    if isinstance(parsed, list):
        return len(raw) - 1
    if not isinstance(parsed, dict):
        return None
    for key in prompt_facts.HISTORY_KEYS:  # the first truthy, in a loop: no generator a history
        if parsed.get(key):
            break
    else:
        return None
    if not isinstance(parsed[key], list):
        return None
    keys = list(parsed)
    after = keys[keys.index(key) + 1 :]
    data, start, end = raw.data, raw.start, raw.end  # searched where it sits: no copy of it all
    if not after:  # "]", then "}", whitespace around them
        close = _last_byte(data, start, end)
        bracket = _last_byte(data, start, close)
        return bracket - start if data[close] == _BRACE_CLOSE and data[bracket] == _CLOSE else None
    if len(after[0]) >= _FOLLOWS_CHARS:
        return None  # compiled, it would stay in ``re``'s own cache too
    rest = {k: parsed[k] for k in after}
    follows = _FOLLOWS.get(after[0])
    if follows is None:
        follows = re.compile(rb"\]\s*,\s*(" + re.escape(json.dumps(after[0]).encode()) + rb")\s*:")
        if len(_FOLLOWS) < _FOLLOWS_KEPT:
            _FOLLOWS[after[0]] = follows
    written: bytes | None = None
    for found in follows.finditer(data, start, end):
        at = found.start(1)
        # The keys after as orjson writes them (a compact writer's bytes): they read back as
        # themselves, so these bytes parse to them without a parse.  A writer that puts a
        # space after the colon (Python's json) writes no such bytes: none are made for it.
        if written is None:
            written = b"" if data[found.end()] in _SPACE else _written(rest)
        if written and end - at == len(written) and data.startswith(written, at, end):
            return found.start() - start
        try:
            if orjson.loads(b"{" + data[at:end]) == rest:
                return found.start() - start
        except orjson.JSONDecodeError:
            continue
    return None


def _last_byte(data: bytes, start: int, end: int) -> int:
    """The index of the last byte of ``data[start:end]`` that is no JSON whitespace (``start``
    when there is none: the caller tests the byte found)."""
    at = end - 1
    while at > start and data[at] in _SPACE:
        at -= 1
    return at


def _written(keys: dict[str, Any]) -> bytes:
    """``keys`` as orjson writes them, without the opening brace, when that text parses back
    to ``keys`` (no null in it: orjson writes NaN and the infinities as null); else b""."""
    try:
        written = orjson.dumps(keys)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, text that is no UTF-8
        return b""
    return b"" if b"null" in written else written[1:]


def _remember(histories: list[History], history: History) -> None:
    histories.insert(0, history)
    del histories[REMEMBERED:]


REMEMBERED = 4  # message histories remembered per reader (see ``unread_part``); 0 reads each whole
_OPEN, _CLOSE, _COMMA, _BRACE, _BRACE_CLOSE = ord("["), ord("]"), ord(","), ord("{"), ord("}")
_ENDS = (_COMMA, _CLOSE)  # what may follow the text a history shares with one read before
_CLOSES = {_OPEN: _CLOSE, _BRACE: _BRACE_CLOSE}  # a history's first byte -> its last
_SPACE = frozenset(b" \t\n\r")  # JSON's whitespace


class Histories:
    """The histories one session has read, newest first, for each reader."""

    __slots__ = ("by_reader",)

    def __init__(self) -> None:
        self.by_reader: dict[str, list[History]] = {}

    def absorb(self, other: Histories) -> None:
        """What ``other`` read stays read: its histories continue here without a re-read."""
        for reader, theirs in other.by_reader.items():
            self.by_reader[reader] = [*self.by_reader.get(reader, []), *theirs][:REMEMBERED]

    def unread_part(self, raw: Encoded, reader: str) -> str | None:
        """The messages of a history that ``reader`` has not read yet in this session, as a
        JSON array ("" when it has read them all); None when ``raw`` is to be read whole (no
        history, or none that continues one it read before).  Readers take different things
        from a history (a span's messages give user turns, a log record's content does not),
        so what one has read is not read for another.

        Each chat span records the whole conversation so far, so reading every history whole
        costs the square of a session's length.  A history is a JSON array of messages, or an
        object holding one (``History``).  When ``raw`` continues one read before (the same
        bytes up to that one's array's closing bracket, then a comma and more elements, then
        the same bytes from that bracket on), only the elements added are new: parsing is
        deterministic, so the shared text parses to the same values.  A few histories are
        remembered per session (sub-agents keep conversations of their own), each as its
        bytes, compared as bytes (``History.starts``: a long one in its ends and a window),
        where hashing or decoding them would cost more (decoding text that is not ASCII
        ~10x), and only the new part is decoded.  A window compared in a history found
        different is compared in the older ones tried after it, so that a change one window
        shows is not taken for a continuation of an older history that holds those bytes."""
        data, start, stop = raw.data, raw.start, raw.end  # read where they sit: no call a byte
        size = stop - start
        if not size or _CLOSES.get(data[start]) != data[stop - 1]:
            return None
        histories = self.by_reader.get(reader)
        if histories is None:
            histories = self.by_reader[reader] = []
        differed: list[tuple[int, int]] = []  # windows compared in a history found different
        for history in histories:
            end = history.end  # where its array closes
            tail = history.tail  # and its bytes from there on
            rest = size - len(tail)  # where this one's array would close
            if rest < end or data[start + end] not in _ENDS or not data.startswith(tail, start + rest, stop):
                continue
            if not history.starts(raw, differed):
                continue
            if rest == end:
                return ""  # the same history again (a retried or duplicated span)
            if data[start + end] == _COMMA:
                # The elements added and the bracket that closes them ("]", the tail's first byte).
                unread = "[" + data[start + end + 1 : start + rest + 1].decode("utf-8", "replace")
                if type(parse_json(unread)) is not list:
                    return None
                _remember(histories, History(raw, rest, history))
                return unread
        parsed = parse_json(raw.text())
        # An array closes at its last byte; an object, where ``_array_end`` finds its history's end.
        close = size - 1 if type(parsed) is list else _array_end(raw, parsed)
        if close is not None:
            _remember(histories, History(raw, close))
        return None
