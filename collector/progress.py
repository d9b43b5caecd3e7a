"""A progress line on a terminal: rewritten in place, shown only for work that takes a while."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # an annotation only: the command line imports replay's chain when it replays
    from collector.replay import Progress


class ProgressLine:
    """Writes ``Progress`` to ``stream`` as one line rewritten in place.

    Nothing is written when ``stream`` is not a terminal, nor before ``delay`` seconds have
    passed; after that at most once per ``interval``.  ``finish`` erases the line."""

    def __init__(
        self,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
        delay: float = 1.0,
        interval: float = 0.25,
    ) -> None:
        self._stream = stream
        self._clock = clock
        self._interval = interval
        self._enabled = stream.isatty()
        self._next = clock() + delay
        self._shown = False

    def __call__(self, progress: Progress) -> None:
        if not self._enabled:
            return
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval
        self._stream.write("\r\x1b[K" + describe(progress))
        self._stream.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False


def describe(p: Progress) -> str:
    mb, total = p.bytes / 1e6, p.bytes_total / 1e6
    return (
        f"replay: {p.files}/{p.files_total} files, {mb:.1f}/{total:.1f} MB read, "
        f"{p.requests} requests, {p.sessions} sessions"
    )
