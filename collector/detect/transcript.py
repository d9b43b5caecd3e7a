"""Signals inside recorded conversations, whatever the message format.

Two things hide in message lists that no tool span shows: tool calls a harness never ran
(one cancelled by a hook, one naming an unknown skill), and SKILL.md bodies injected without
any call (pinned skills, a follow-up message after a skill tool call).  Each block shape is a
row of ``facts``: a dict is a block when a key, its "type" value or a tag says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from collector.detect import documents
from collector.detect.content import flatten_text, parse_json
from collector.detect.facts import blocks as block_facts
from collector.detect.facts import catalogs as catalog_facts
from collector.detect.facts import injections as injection_facts
from evaluators import skill_md
from evaluators.evidence import fold_skill_name


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
    name: str = ""  # the tool's name, where the format records it beside the result
    value: Any = None  # the result as recorded (an object's error fields say how it went)


@dataclass(frozen=True, slots=True)
class Injection:
    skill: str
    body: str
    path: str | None
    follows_tool: bool  # a follow-up to a skill tool call, rather than a standalone pin


Block = MessageCall | MessageResult | None


# A walk visits every dict of a history, and most are text parts: cheap lookups rule them out.
_KEYED = block_facts.KEYED_BLOCKS
_TYPE_KEY = block_facts.BLOCK_TYPE_KEY
_TYPED = block_facts.TYPED_BLOCKS
_TAGGED = tuple((fields.id, key, value, fields) for key, value, fields in block_facts.TAGGED_BLOCKS)


def block_of(d: dict[str, Any]) -> Block:
    """The tool call or result a dict records, if it is one: by a key it holds the block
    under, then by its "type" value, then by a tag beside its id."""
    for key, fields in _KEYED:
        if key in d:
            inner = d[key]
            if isinstance(inner, dict):
                block = _block(inner, fields)
                if block is not None:
                    return block
    kind = d.get(_TYPE_KEY)
    if isinstance(kind, str):
        typed = _TYPED.get(kind)
        if typed is not None:
            block = _block(d, typed)
            if block is not None:
                return block
    for id_key, key, value, fields in _TAGGED:
        if id_key in d:
            tag = d.get(key)
            if (tag == value) if value is not None else isinstance(tag, dict):
                return _block(d, fields)
    return None


def _block(d: dict[str, Any], fields: block_facts.CallFields | block_facts.ResultFields) -> Block:
    """The block ``d`` records, read through ``fields`` (None if its parts are not there)."""
    if isinstance(fields, block_facts.ResultFields):
        failed: bool | None
        if not fields.error:
            failed = None
        elif fields.error_value:
            failed = d.get(fields.error) == fields.error_value
        else:
            failed = bool(d.get(fields.error))
        value = d.get(fields.text)
        name = d.get(fields.name) if fields.name else ""
        return MessageResult(
            str(d.get(fields.id) or ""),
            flatten_text(value),
            failed,
            name if isinstance(name, str) else "",
            value,
        )
    inner = d.get(fields.within) if fields.within else d
    if not isinstance(inner, dict):
        return None
    arguments = inner.get(fields.arguments)
    if arguments is None and fields.other_arguments:
        arguments = inner.get(fields.other_arguments)
    if fields.json_arguments and isinstance(arguments, str):  # JSON text, or already an object
        arguments = parse_json(arguments) or arguments
    return MessageCall(str(d.get(fields.id) or ""), str(inner.get(fields.name) or ""), arguments)


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
    # Without recursion (a stack of iterators, each resumed where it stopped, keeps document
    # order): a value nested 1,000 deep is walked the same at any recursion limit and from any
    # caller.  Appending to lists: a generator per nesting level costs more than the work
    # itself.  Inside a block, only strings are still collected (blocks do not nest).  A
    # container's strings, numbers and literals are handled in its own loop: a stack entry per
    # leaf would cost more than the leaf.
    stack: list[tuple[Iterator[Any], bool]] = [(iter((value,)), found is not None)]
    while stack:
        items, want_blocks = stack[-1]
        for item in items:
            if isinstance(item, str):
                nested = _nested(item)
                if nested is None:
                    if strings is not None:
                        strings.append(item)
                    continue
                item = nested
            if isinstance(item, dict):
                inner = want_blocks
                if inner and found is not None:
                    block = block_of(item)
                    if block is not None:
                        found.append(block)
                        inner = False
                        if strings is None:
                            continue
                if strings is None and not inner:
                    continue
                stack.append((iter(item.values()), inner))
                break
            if isinstance(item, list):
                stack.append((iter(item), want_blocks))
                break
        else:
            stack.pop()


# A skill's body framed by a tag that names it, under any tag: <x name="skill" path="...">body</x>.
_FRAMED_MARKER = 'name="'
_FRAMED = re.compile(
    r'<(?P<tag>[A-Za-z_][\w.:-]*)\s(?P<attrs>[^<>]*?\bname="(?P<name>[^"]+)"[^<>]*)>(?P<body>.*?)(?:</(?P=tag)>|\Z)',
    re.DOTALL,
)
_PATH_ATTRIBUTE = re.compile(r'\b(?:path|location|file)="(?P<path>[^"]*)"')


def _framed(text: str) -> Iterator[Injection]:
    """Skill bodies by shape: a tag whose ``name`` attribute names the skill, around a body
    that opens as that skill's does (its front matter, or a heading naming it).  A catalog's
    entries hold descriptions, never such bodies."""
    for match in _FRAMED.finditer(text):
        skill, body = match.group("name").strip(), match.group("body").strip()
        document = skill_md.try_parse(body) if body.startswith("---") else None
        if document is not None and fold_skill_name(document.name) == fold_skill_name(skill):
            body = document.body
        elif not documents.headed_by(body, skill):
            continue
        path = _PATH_ATTRIBUTE.search(match.group("attrs"))
        yield Injection(skill, body, path.group("path") if path else None, follows_tool=False)


# A line naming a SKILL.md's location ("Skill location: /x/skills/<name>/SKILL.md"), then,
# past a parenthesised note and blank lines, a body up to a closing tag's line or the end.
LOCATED_MARKER = "/SKILL.md"
_LOCATED = re.compile(
    r"^[^\n<>]*?:[ \t]*(?P<path>\S*/(?P<name>[^/\s]+)/SKILL\.md)[ \t]*\n(?:[ \t]*\([^\n]*\)[ \t]*\n)?\s*"
    r"(?P<body>.*?)(?=\n[ \t]*</[A-Za-z][\w.:-]*>|\Z)",
    re.MULTILINE | re.DOTALL,
)


def located(text: str) -> Iterator[Injection]:
    """Skill bodies put into a message with the line naming their SKILL.md's location before
    them (a harness injecting a skill on a keyword match): the folder names the skill, and
    the body must open as that skill's does (its front matter, or a heading naming it)."""
    for match in _LOCATED.finditer(text):
        skill, body = match.group("name"), match.group("body").strip()
        document = skill_md.try_parse(body) if body.startswith("---") else None
        if document is not None and fold_skill_name(document.name) == fold_skill_name(skill):
            body = document.body
        elif not documents.headed_by(body, skill):
            continue
        yield Injection(skill, body, match.group("path"), follows_tool=False)


def injections(value: Any) -> Iterator[Injection]:
    return injections_in(all_strings(value))


def injections_in(strings: Iterable[str]) -> Iterator[Injection]:
    """Injections in strings already taken out of a value (``all_strings``), in order: an
    inlined file is the string after the header naming it, and loads when it is a SKILL.md."""
    inlined: str | None = None  # the path the previous string announced
    for text in strings:
        if inlined is not None:
            document = skill_md.try_parse(text)
            if document is not None:
                yield Injection(document.name, document.body, inlined, follows_tool=False)
            inlined = None
        if injection_facts.INLINED_FILE_MARKER in text:
            header = injection_facts.INLINED_FILE_HEADER.match(text)
            if header is not None and header.group(1).endswith("SKILL.md"):
                inlined = header.group(1)
        if injection_facts.ACTIVATED_SKILL_MARKER in text:
            for match in injection_facts.ACTIVATED_SKILL_TAG.finditer(text):
                yield Injection(match.group(1), match.group(2).strip(), None, follows_tool=True)
        if injection_facts.INJECTED_SKILL_MARKER in text:
            catalogs = [m.span() for m in catalog_facts.CATALOG_XML_BLOCK.finditer(text)]
            for match in injection_facts.INJECTED_SKILL_TAG.finditer(text):
                # A catalog's <skill name="x"> entries hold descriptions, never bodies.
                if not any(start <= match.start() < end for start, end in catalogs):
                    yield Injection(
                        match.group(1), match.group(3).strip(), match.group(2), follows_tool=False
                    )
        if injection_facts.CAPABILITY_SKILL_MARKER in text:
            for match in injection_facts.CAPABILITY_SKILL_TAG.finditer(text):
                if match.group(1) == match.group(2).strip():
                    yield Injection(match.group(1), match.group(3).strip(), None, follows_tool=True)
        if _FRAMED_MARKER in text:
            yield from _framed(text)
        if text.startswith(injection_facts.BASE_DIRECTORY_PREFIX):
            base = injection_facts.BASE_DIRECTORY.match(text)
            if base is not None:
                directory = base.group(1).strip().rstrip("/")
                yield Injection(
                    directory.rsplit("/", 1)[-1], base.group(2).strip(), directory, follows_tool=True
                )
