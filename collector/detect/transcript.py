"""Signals inside recorded conversations, whatever the message format.

Two things hide in message lists that no tool span shows: tool calls a harness never ran
(a Strands call cancelled by a hook, a Claude ``Skill`` call naming an unknown skill), and
SKILL.md bodies injected without any call (Deep Agents pinned skills, Claude's follow-up
"Base directory for this skill:" message).  Each block shape below is one convention.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from collector.detect import patterns
from collector.detect.content import flatten_text, parse_json


@dataclass(frozen=True, slots=True)
class MessageCall:
    call_id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class MessageResult:
    call_id: str
    text: str
    is_error: bool | None  # None: the format does not say


@dataclass(frozen=True, slots=True)
class Injection:
    skill: str
    body: str
    path: str | None
    follows_tool: bool  # Claude's follow-up to a Skill call, rather than a standalone pin


Block = MessageCall | MessageResult | None


def _strands_use(d: dict[str, Any]) -> Block:
    use = d.get("toolUse")
    return (
        MessageCall(str(use.get("toolUseId", "")), str(use.get("name", "")), use.get("input"))
        if isinstance(use, dict)
        else None
    )


def _strands_result(d: dict[str, Any]) -> Block:
    res = d.get("toolResult")
    if not isinstance(res, dict):
        return None
    return MessageResult(
        str(res.get("toolUseId", "")), flatten_text(res.get("content")), res.get("status") == "error"
    )


def _anthropic(d: dict[str, Any]) -> Block:
    kind = d.get("type")
    if kind == "tool_use":
        return MessageCall(str(d.get("id", "")), str(d.get("name", "")), d.get("input"))
    if kind == "tool_result":
        return MessageResult(
            str(d.get("tool_use_id", "")), flatten_text(d.get("content")), bool(d.get("is_error"))
        )
    return None


def _genai_parts(d: dict[str, Any]) -> Block:
    kind = d.get("type")
    if kind == "tool_call":
        return MessageCall(str(d.get("id", "")), str(d.get("name", "")), d.get("arguments"))
    if kind == "tool_call_response":
        return MessageResult(str(d.get("id", "")), flatten_text(d.get("response")), None)
    return None


def _openai_tool_message(d: dict[str, Any]) -> Block:
    if d.get("role") == "tool" and "tool_call_id" in d:
        return MessageResult(str(d["tool_call_id"]), flatten_text(d.get("content")), None)
    function = d.get("function")
    if isinstance(function, dict) and "id" in d:
        return MessageCall(
            str(d["id"]),
            str(function.get("name", "")),
            parse_json(function.get("arguments")) or function.get("arguments"),
        )
    return None


# One function per message convention; each recognises its own blocks or returns None.
# Every shape needs one of these words in the text (keys or type values), so text without
# any of them holds no block and is not walked.
BLOCK_MARKERS: tuple[str, ...] = ("toolUse", "toolResult", "tool_use", "tool_result", "tool_call", "function")
# Which shape to try on a dict, in order: by a key it must have, then by its "type" value.
# A walk visits every dict of a history, and most are text parts: a lookup rules them out.
KEYED_SHAPES: tuple[tuple[str, Callable[[dict[str, Any]], Block]], ...] = (
    ("toolUse", _strands_use),  # Strands: {"toolUse": {...}}
    ("toolResult", _strands_result),  # Strands: {"toolResult": {...}}
)
TYPED_SHAPES: dict[str, Callable[[dict[str, Any]], Block]] = {
    "tool_use": _anthropic,  # Anthropic Messages API: tool_use / tool_result blocks
    "tool_result": _anthropic,
    "tool_call": _genai_parts,  # GenAI semconv parts: tool_call / tool_call_response
    "tool_call_response": _genai_parts,
}
LAST_SHAPE_KEYS: tuple[str, ...] = ("tool_call_id", "function")  # OpenAI chat: role "tool" / tool_calls[]


def block_of(d: dict[str, Any]) -> Block:
    """The tool call or result a dict records, if it is one."""
    for key, shape in KEYED_SHAPES:
        if key in d:
            block = shape(d)
            if block is not None:
                return block
    kind = d.get("type")
    if isinstance(kind, str):
        typed = TYPED_SHAPES.get(kind)
        if typed is not None:
            block = typed(d)
            if block is not None:
                return block
    for key in LAST_SHAPE_KEYS:
        if key in d:
            return _openai_tool_message(d)
    return None


def blocks(value: Any) -> list[MessageCall | MessageResult]:
    """Every tool call and tool result block in a decoded value, in document order."""
    found: list[MessageCall | MessageResult] = []
    _walk(value, None, found)
    return found


def all_strings(value: Any) -> list[str]:
    """Every string inside a decoded JSON value, decoding JSON text found along the way."""
    strings: list[str] = []
    _walk(value, strings, None)
    return strings


def strings_and_blocks(
    value: Any, want_strings: bool, want_blocks: bool
) -> tuple[list[str], list[MessageCall | MessageResult]]:
    """``all_strings`` and ``blocks`` of a value in one walk (each only when wanted)."""
    strings: list[str] = []
    found: list[MessageCall | MessageResult] = []
    _walk(value, strings if want_strings else None, found if want_blocks else None)
    return strings, found


_JSON_OPENERS = '{["'  # what ``parse_json`` reads: the first character of an object, array or string
_CONTAINERS = (dict, list)


def _nested(text: str) -> dict[str, Any] | list[Any] | None:
    """The object or array a string holds as JSON text, else None (most strings are prose:
    only one that opens like JSON is worth a parse)."""
    if len(text) > 1 and text[0] in _JSON_OPENERS:
        nested = parse_json(text)
        if isinstance(nested, _CONTAINERS):
            return nested
    return None


def _walk(value: Any, strings: list[str] | None, found: list[MessageCall | MessageResult] | None) -> None:
    # Appending to lists: a generator per nesting level costs more than the work itself.
    # Inside a block, only strings are still collected (blocks do not nest).  A container's
    # strings, numbers and literals are handled in its own loop: a call per leaf would cost
    # more than the leaf.
    if isinstance(value, str):
        nested = _nested(value)
        if nested is None:
            if strings is not None:
                strings.append(value)
            return
        value = nested
    if isinstance(value, dict):
        if found is not None:
            block = block_of(value)
            if block is not None:
                found.append(block)
                if strings is None:
                    return
                found = None
        if strings is None and found is None:
            return
        items: Iterable[Any] = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return
    for item in items:
        if isinstance(item, str):
            nested = _nested(item)
            if nested is None:
                if strings is not None:
                    strings.append(item)
                continue
            item = nested
        if isinstance(item, _CONTAINERS):
            _walk(item, strings, found)


# Text without these holds no injection.  ``u003cskill`` is ``<skill`` as JSON encoders
# that escape HTML characters (Go's, for one) write it.
INJECTION_MARKERS: tuple[str, ...] = ("<skill ", "u003cskill ", "Base directory for this skill:")


def injections(value: Any) -> Iterator[Injection]:
    return injections_in(all_strings(value))


def injections_in(strings: Iterable[str]) -> Iterator[Injection]:
    """Injections in strings already taken out of a value (``all_strings``)."""
    for text in strings:
        if "<skill " in text:
            for match in patterns.INJECTED_SKILL_TAG.finditer(text):
                yield Injection(match.group(1), match.group(3).strip(), match.group(2), follows_tool=False)
        if text.startswith("Base directory for this skill:"):
            base = patterns.BASE_DIRECTORY.match(text)
            if base is not None:
                directory = base.group(1).strip().rstrip("/")
                yield Injection(
                    directory.rsplit("/", 1)[-1], base.group(2).strip(), directory, follows_tool=True
                )
