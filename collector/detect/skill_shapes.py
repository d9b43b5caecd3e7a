"""Signal: a skill tool no row of ``facts`` names, told by its shape.

A call is a skill load when its arguments name a skill (a value that is a skill's name, not
a path) and its result carries that skill's body, or its error names the skill:

- ``detect`` (as the call arrives): the result holds a SKILL.md whose front matter names the
  skill, or text under a heading that names it ("# Release notes" for ``release-notes``);
  or the call failed with words that name the skill and say "skill".
- ``detect_named`` (at close, for calls nothing claimed): a value equal to a name of the
  session's catalog or of the operator's registry; the result a body or an acknowledgement
  naming the skill, a refusal naming it, or nothing recorded (a redacted or empty output):
  then an ``unresolved`` load of the skill named.

Only tools the table does not know are read (``families.unnamed``), and never one whose name
says it writes (``families.writes``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from collector.detect import documents, names
from collector.detect.content import arguments_of, parse_json, result_text
from collector.detect.families import Family, unnamed, writes
from collector.detect.outcome import outcome
from collector.detect.transcript import all_strings
from evaluators.evidence import Catalog, LoadStatus, SkillLoad, ToolCall, fold_skill_name

_MAX_VALUES = 16  # argument values looked at
_SKILL_WORD = "skill"
_ACK_MAX_CHARS = 240  # a one-line result naming the skill acknowledges its load
_DESCRIPTION_WORDS = 3  # a body shares this many of its catalog description's words


def named_values(call: ToolCall) -> list[str]:
    """The argument values that may be a skill's name: strings (top level, or one level
    down) that pass the name rule; paths are no names."""
    return values_named(arguments_of(call))


def values_named(arguments: Any) -> list[str]:
    """``named_values`` of a call's arguments (``arguments_of``)."""
    values: list[Any] = list(arguments.values()) if isinstance(arguments, dict) else [arguments]
    found: list[str] = []
    for value in values[:_MAX_VALUES]:
        inner = (
            list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else [value]
        )
        for item in inner[:_MAX_VALUES]:
            if isinstance(item, str):
                name = item.strip()
                if name and "/" not in name and "\\" not in name and names.plausible(name):
                    found.append(name)
    return found


def names_in(arguments: Any, skill: str) -> bool:
    """Whether a call's arguments (``arguments_of``) name ``skill`` by its name."""
    return _named_as(values_named(arguments), skill) is not None


def _named_as(values: list[str], skill: str) -> str | None:
    """The first of ``values`` naming ``skill`` (folded as names are), or None."""
    folded = fold_skill_name(skill)
    for value in values:
        if fold_skill_name(value) == folded:
            return value
    return None


def detect(call: ToolCall) -> SkillLoad | None:
    return detect_family(Family(call))


def detect_family(family: Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    if not family.unnamed or family.writes:
        return None
    values = values_named(family.arguments)
    if not values:
        return None
    call = family.call
    status, message = outcome(call)
    if call.result is not None:
        text = family.text()
        document = documents.find(text)
        named = _named_as(values, document.name) if document is not None else None
        if document is not None and named is not None:
            return skill_tool_load(
                call, named, status, message, document.body if status == "loaded" else None
            )
        if status == "loaded":
            for skill in values:
                body = _headed_body(call, skill)
                if body is not None:
                    return skill_tool_load(call, skill, status, message, body)
            return None
    if status in ("failed", "denied"):
        refusal = f"{message or ''}\n{call.error or ''}\n{family.text()}"
        if _SKILL_WORD in refusal.casefold():
            for skill in values:
                if _names(refusal, skill):
                    return skill_tool_load(call, skill, status, message, None)
    return None


def detect_named(call: ToolCall, catalog: Catalog, known: Mapping[str, str]) -> SkillLoad | None:
    """A call's load of a skill its arguments name by a catalog's or the registry's name."""
    if not unnamed(call) or writes(call):
        return None
    listed = [
        v for v in named_values(call) if fold_skill_name(v) in catalog.skills or fold_skill_name(v) in known
    ]
    if not listed:
        return None
    skill = listed[0]
    if call.error is None and (call.result is None or not call.result.strip()):
        # An output redacted, or none: unresolved, unless the span says the call ran.
        ran = call.succeeded or call.skill_resolved
        return skill_tool_load(call, skill, "loaded" if ran else "unresolved", None, None)
    status, message = outcome(call)
    text = result_text(call) or call.result or ""
    if status != "loaded":
        refusal = f"{message or ''}\n{call.error or ''}\n{text}"
        return skill_tool_load(call, skill, status, message, None) if _names(refusal, skill) else None
    body = _headed_body(call, skill)
    if body is None:
        entry = catalog.skills.get(fold_skill_name(skill))
        if entry is not None and _describes(entry.description, text):
            body = text.strip()
    if body is not None:
        return skill_tool_load(call, skill, "loaded", None, body)
    one_line = text.strip()
    if "\n" not in one_line and len(one_line) < _ACK_MAX_CHARS and _names(one_line, skill):
        return skill_tool_load(call, skill, "loaded", None, None)  # an acknowledgement; the body comes apart
    return None


def _headed_body(call: ToolCall, skill: str) -> str | None:
    """The text of the result (or of a string inside it) under a heading naming ``skill``."""
    parsed = parse_json(call.result)
    strings = all_strings(parsed) if isinstance(parsed, (dict, list)) else [result_text(call)]
    for text in strings:
        if documents.headed_by(text, skill):
            return text.strip()
    return None


def _names(text: str, skill: str) -> bool:
    """Whether ``text`` names ``skill`` as a word (not inside a longer name)."""
    return re.search(rf"(?<![\w-]){re.escape(skill)}(?![\w-])", text, re.IGNORECASE) is not None


def _describes(description: str, body: str) -> bool:
    """Whether a body is the one a catalog's description describes: it shares enough of the
    description's words."""
    words = {w for w in re.findall(r"[a-z]{5,}", description.casefold())}
    if not words:
        return False
    folded = body.casefold()
    shared = sum(1 for w in words if w in folded)
    return shared >= min(_DESCRIPTION_WORDS, len(words))


def skill_tool_load(
    call: ToolCall, skill: str, status: LoadStatus, message: str | None, body: str | None
) -> SkillLoad:
    """The ``skill_tool`` load ``call`` makes of ``skill``."""
    return SkillLoad(  # by position: a class called with keywords makes a dict of them
        skill,
        status,
        "skill_tool",
        call.span_id,
        call.trace_id,
        call.start_unix_nano,
        body,
        None,
        message,
        call.call_id,
    )
