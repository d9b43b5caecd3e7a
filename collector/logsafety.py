"""Log lines that hostile input cannot forge or flood: control characters escaped in every
message (``EscapeControls``), and malformed HTTP requests, refused before any auth, logged
once a minute with a count instead of one traceback each (``MalformedRequests``)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError

# C0 and C1 controls (newlines, ESC for ANSI sequences), line/paragraph separators and
# bidirectional overrides: what would let logged span text forge lines or hide itself.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class EscapeControls(logging.Filter):
    """Escapes control characters in every log message, whatever put them there.

    Span-derived strings are logged with ``%r`` already; this is the net under that rule, for
    a message that forgets it.  Tracebacks (added by the formatter) are left as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _UNSAFE.search(message):
            record.msg = _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), message)
            record.args = None
        return True


class MalformedRequests(logging.Filter):
    """For aiohttp's server logger: a request it could not parse (a client's fault, answered
    4xx and closed before any handler or auth ran) becomes one WARNING line without a
    traceback, at most once per ``every`` seconds, saying how many were not logged since.
    Any other record passes unchanged."""

    def __init__(self, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._every = every
        self._clock = clock
        self._last: float | None = None
        self.suppressed = 0
        self.seen = 0  # malformed requests, since the start

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError):
            return True
        self.seen += 1
        now = self._clock()
        if self._last is not None and now - self._last < self._every:
            self.suppressed += 1
            return False
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        first = (error.message or "").strip().splitlines()
        record.msg = "malformed HTTP request from %s, answered %d and closed: %s"
        record.args = (peer, error.code, first[0] if first else type(error).__name__)
        if self.suppressed:
            record.msg += " (%d more in the last %.0fs)"
            record.args = (*record.args, self.suppressed, now - self._last if self._last is not None else 0.0)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        self._last, self.suppressed = now, 0
        return True


def escape_logs() -> None:
    """Install ``EscapeControls`` on every handler of the root logger (once), and
    ``MalformedRequests`` on aiohttp's server logger."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, EscapeControls) for f in handler.filters):
            handler.addFilter(EscapeControls())
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, MalformedRequests) for f in server.filters):
        server.addFilter(MalformedRequests())
