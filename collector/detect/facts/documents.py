"""How tools print a SKILL.md: front matter lines, envelopes and trailers.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

# A front matter opening line, as tools print it: bare, after a line-number gutter
# ("     1\t---", "1: ---", "1| ---", "1→---"), or after a label on the same line ("Output: ---",
# Gemini CLI's shell).  The document starts at group "open" (the gutter, if any, is kept: the
# parser strips it from every line).
FRONT_MATTER_LINE: re.Pattern[str] = re.compile(
    r"^[ \t]*(?:[A-Za-z][\w ]{0,30}:[ \t]*)?(?P<open>(?:\d+(?:\t|→|\|[ \t]?|:[ \t]?| {2}))?---)[ \t]*\r?$",
    re.MULTILINE,
)
# How many "---" lines are tried as the opening one (a header may hold a rule of its own).
FRONT_MATTER_TRIES = 3
# An envelope a read tool puts the file in: <file path="...">...</file>, <content>...</content>.
XML_ENVELOPE: re.Pattern[str] = re.compile(
    r"^\s*<([A-Za-z_][\w.-]*)\b[^>\n]*>[ \t]*\r?\n?(.*?)\s*</\1>\s*$", re.DOTALL
)
# Lines a tool appends to what it printed: a truncation marker ("[... truncated ...]",
# "... (output truncated)", "[Output truncated: 120 more lines]"), an exit-code footer.
TRAILER_LINE: re.Pattern[str] = re.compile(
    r"\n[ \t]*(?:\[[^\]\n]*truncated[^\]\n]*\]|\.{3}[^\n]*truncated[^\n]*|\(?(?:output )?truncated\b[^\n]*"
    r"|\[?Process exited with code -?\d+\]?|\[Command (?:succeeded|failed) with exit code -?\d+\]"
    r"|Process Group PGID: \d+)[ \t]*$",  # Gemini CLI's shell
    re.IGNORECASE,
)
