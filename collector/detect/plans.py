"""What a span's attribute keys alone decide for detection, worked out once per key shape.

One instrumentation's spans of one kind carry the same keys (``Attributes.shape``: in the
map's order, the same for the same keys within a process).  Which of the tables' keys a span holds (tool and agent markers, prompt
fields, answers, tool definitions, flattened messages, keys no table names that may hold a
prompt or an input, a tool call by its keys' shape) depends on those keys only, so a
``SpanPlan`` holds the answer for every span of the shape, and a span costs one lookup by
its shape instead of a pass over each table.  What depends on values (a marker's expected
value, a mime type, the text itself) is still read from the span.

A plan lists keys in the order the readers read them: a table's keys in the table's order, the
keys it finds by their names (prompts and inputs no table names, flattened outputs) sorted, so
that a span reads alike in every process (``tests/detect/test_plans.py``).

``SpanPlan.reads_nothing``: a span of the shape, without events, holds nothing any reader of
prompt text, answers, catalogs or flattened messages reads (every table's list above is
empty), so ``SessionEvidence.observe_span`` stops after its bookkeeping (``SKIP_EMPTY``).
The skip is exact, not a guess: each of those readers reads only keys its list names.
``tests/detect/test_plans.py`` assembles every recording with the skip and without it and
compares the sessions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collector.detect.content import ShapedToolKeys, shaped_tool_keys
from collector.detect.expectations import EXPECTED_SKILLS_ATTRIBUTE
from collector.detect.facts import logs as log_facts
from collector.detect.facts import prompts as prompt_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.otlp.shapes import kept
from collector.otlp.views import Attributes

Marker = tuple[str, str | None]  # (key, the value it must hold, or None: any)
TOOL, AGENT = 1, 2  # what a marker's value makes a span (``SpanPlan.marks``), as bits

# Span attributes of the prompt tables: (key, role).
PROMPT_ATTRIBUTES: tuple[tuple[str, str], ...] = tuple(
    (key, role) for event, key, role in prompt_facts.PROMPT_FIELDS if not event
)
RESPONSE_ATTRIBUTES: tuple[tuple[str, str], ...] = tuple(
    (key, "") for event, key in prompt_facts.RESPONSE_FIELDS if not event
)
TOOL_DEFINITIONS: tuple[tuple[str, str], ...] = tuple(
    (key, "tools") for key in prompt_facts.TOOL_DEFINITION_KEYS
)

# Every attribute key a table reads already; the generic readers leave them alone.
KNOWN_KEYS = frozenset(
    [key for _, key, _ in prompt_facts.PROMPT_FIELDS]
    + [key for _, key in prompt_facts.RESPONSE_FIELDS]
    + list(tool_span_facts.TOOL_ARGUMENT_KEYS)
    + list(tool_span_facts.TOOL_RESULT_KEYS)
    + list(log_facts.LOG_CONTENT_ATTRIBUTES)
    + list(prompt_facts.TOOL_DEFINITION_KEYS)
)

Field = tuple[str, str, str | None]  # (role, key, the key of its mime type, if the table names one)


@dataclass(frozen=True, slots=True)
class SpanPlan:
    """What one key shape holds.  Keys are listed in the order their readers read them."""

    model: bool  # a key in a GenAI convention (``tool_span_facts.MODEL_ATTRIBUTE_PREFIXES``)
    expected: bool  # the expected-skills attribute
    tool_markers: tuple[Marker, ...]  # ``TOOL_SPAN_MARKERS`` whose key is present
    tool_marked: bool  # one of them holds any value: a tool span by its keys alone
    agent_marked: bool  # one of them holds any value: an agent span by its keys alone
    # The present markers that need a value, by key: (key, value -> TOOL and/or AGENT).  A
    # span's kind by them is one read of each key and one lookup of its text.
    marks: tuple[tuple[str, dict[str, int]], ...]
    keyless: bool  # no key at all
    catalog_names: tuple[str, ...]  # ``CATALOG_NAME_ATTRIBUTES`` present
    prompts: tuple[Field, ...]  # the prompt tables' span attributes present
    flattened: tuple[str, ...]  # flattened input message keys, in message and part order
    flattened_texts: tuple[str, ...]  # of those, the ones holding text
    outputs: tuple[str, ...]  # flattened output message keys holding text
    others: tuple[str, ...]  # keys no table names that may hold a prompt (``prompt_key``)
    inputs: tuple[str, ...]  # keys no table names that hold an operation's input
    tool_definitions: tuple[Field, ...]
    responses: tuple[Field, ...]
    shaped_tool: ShapedToolKeys | None  # a tool call by its keys' shape (``shaped_tool_keys``)
    reads_nothing: bool  # no key any reader of text reads (see the module doc)


def prompt_key(key: str) -> bool:
    """Whether a key no table names says it may hold a prompt (``prompt_facts.PROMPT_KEY_WORDS``)
    and does not say it holds no text (``prompt_facts.PROMPT_KEY_NOT_TEXT*``: a count, a size,
    an id, a name, the provider)."""
    folded = key.casefold()
    return (
        key not in KNOWN_KEYS
        and key not in prompt_facts.PROMPT_KEY_NOT_TEXT
        and not key.startswith(prompt_facts.PROMPT_KEY_SKIP_PREFIXES)
        and any(word in folded for word in prompt_facts.PROMPT_KEY_WORDS)
        and not folded.endswith(prompt_facts.PROMPT_KEY_NOT_TEXT_ENDINGS)
        and not any(word in folded for word in prompt_facts.PROMPT_KEY_NOT_TEXT_WORDS)
    )


def prompt_keys(shape: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(key for key in shape if prompt_key(key))


def input_keys(shape: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        key
        for key in shape
        if key.endswith(prompt_facts.INPUT_KEY_ENDINGS) and key not in KNOWN_KEYS and not prompt_key(key)
    )


def flattened_keys(shape: tuple[str, ...]) -> tuple[str, ...]:
    """The flattened message keys in message and part order (``.2.`` before ``.10.``)."""
    keys = [key for key in shape if key.startswith(prompt_facts.FLATTENED_PREFIX)]
    if len(keys) > 1:
        keys.sort(key=_order)
    return tuple(keys)


_DIGITS = re.compile(r"(\d+)")


def _order(key: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(key)]


def _fields(present: frozenset[str], table: tuple[tuple[str, str], ...]) -> tuple[Field, ...]:
    return tuple(
        (role, key, prompt_facts.PLAIN_TEXT_INPUTS.get(key)) for key, role in table if key in present
    )


def _marks(present: frozenset[str]) -> tuple[tuple[str, dict[str, int]], ...]:
    """``SpanPlan.marks``: each present key of a marker that needs a value, in the order the
    tables list them, with what each such value makes a span."""
    kinds: dict[str, dict[str, int]] = {}
    for markers, kind in (
        (tool_span_facts.TOOL_SPAN_MARKERS, TOOL),
        (tool_span_facts.AGENT_SPAN_MARKERS, AGENT),
    ):
        for key, value in markers:
            if value is not None and key in present:
                values = kinds.setdefault(key, {})
                values[value] = values.get(value, 0) | kind
    return tuple(kinds.items())


def _plan(shape: tuple[str, ...]) -> SpanPlan:
    present = frozenset(shape)
    flattened = flattened_keys(shape)
    outputs = tuple(
        key
        for key in shape
        if key.startswith(prompt_facts.FLATTENED_OUTPUT_PREFIX)
        and key.rstrip("0123456789").rstrip(".").endswith(prompt_facts.FLATTENED_SUFFIXES)
    )
    prefixes = tool_span_facts.MODEL_ATTRIBUTE_PREFIXES
    catalog_names = tuple(k for k in skill_tool_facts.CATALOG_NAME_ATTRIBUTES if k in present)
    prompts = _fields(present, PROMPT_ATTRIBUTES)
    others, inputs = prompt_keys(shape), input_keys(shape)
    tool_definitions = _fields(present, TOOL_DEFINITIONS)
    responses = _fields(present, RESPONSE_ATTRIBUTES)
    return SpanPlan(
        model=any(key.startswith(prefixes) for key in shape),
        expected=EXPECTED_SKILLS_ATTRIBUTE in present,
        tool_markers=tuple(m for m in tool_span_facts.TOOL_SPAN_MARKERS if m[0] in present),
        tool_marked=any(m[1] is None and m[0] in present for m in tool_span_facts.TOOL_SPAN_MARKERS),
        agent_marked=any(m[1] is None and m[0] in present for m in tool_span_facts.AGENT_SPAN_MARKERS),
        marks=_marks(present),
        keyless=not shape,
        catalog_names=catalog_names,
        prompts=prompts,
        flattened=flattened,
        flattened_texts=tuple(key for key in flattened if key.endswith(prompt_facts.FLATTENED_SUFFIXES)),
        outputs=outputs,
        others=others,
        inputs=inputs,
        tool_definitions=tool_definitions,
        responses=responses,
        shaped_tool=shaped_tool_keys(shape),
        reads_nothing=not (
            catalog_names
            or prompts
            or flattened
            or outputs
            or others
            or inputs
            or tool_definitions
            or responses
        ),
    )


_PLANS: dict[tuple[str, ...], SpanPlan] = {}
SKIP_EMPTY = True  # spans whose plan ``reads_nothing`` skip the readers (off: every span is read)


def plan_of(attrs: Attributes) -> SpanPlan:
    """The plan of ``attrs``' key shape (kept for the shapes kept, ``collector.otlp.shapes``;
    worked out again for each span of another), worked out from its keys sorted: a shape lists
    them in the map's order, which varies between processes (``collector.otlp.classes``)."""
    shape = attrs.shape()
    plan = _PLANS.get(shape)
    if plan is None:
        plan = _plan(tuple(sorted(shape)))  # the map's order varies between processes
        if kept(shape):
            _PLANS[shape] = plan
    return plan


__all__ = [
    "AGENT",
    "KNOWN_KEYS",
    "PROMPT_ATTRIBUTES",
    "RESPONSE_ATTRIBUTES",
    "SKIP_EMPTY",
    "TOOL",
    "TOOL_DEFINITIONS",
    "SpanPlan",
    "flattened_keys",
    "input_keys",
    "plan_of",
    "prompt_key",
    "prompt_keys",
]
