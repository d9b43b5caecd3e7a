"""Log lines that span text cannot forge: control characters escaped in every message."""

from __future__ import annotations

import logging
import re

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


def escape_logs() -> None:
    """Install ``EscapeControls`` on every handler of the root logger (once)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, EscapeControls) for f in handler.filters):
            handler.addFilter(EscapeControls())
