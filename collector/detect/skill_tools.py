"""Signal: a skill tool: a harness's native one (``skills``, ``Skill``, ``load_skill``, ...) by
the table, any other by its shape (``skill_shapes``)."""

from __future__ import annotations

from typing import Any

from collector.detect import documents, families, names, skill_shapes
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.detect.outcome import outcome
from evaluators.evidence import SkillLoad, ToolCall

argument_key = families.skill_argument_key


def detect(call: ToolCall) -> SkillLoad | None:
    """A skill tool the table names (the fast path), or one shaped like a skill tool: a tool
    no row knows, its arguments naming the skill whose body or refusal it returned."""
    return detect_family(families.Family(call))


def detect_family(family: families.Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    key = family.key
    if key is None:
        return skill_shapes.detect_family(family)
    call = family.call
    # A single-argument tool may record its argument as a bare string.
    recorded = skill_argument(family.arguments, key)
    skill = names.decoded(recorded) if recorded is not None else ""
    if not skill and not isinstance(recorded, str):
        skill = names.decoded(call.skill_attribute or "")
    if not skill and call.arguments is None and call.error:
        skill = named_in_error(call.error)
    status, message = outcome(call)
    # Arguments recorded without a name asked for no skill.  With none recorded the name is
    # unknown, not empty: the session reports such a load unresolved (``_keep_names``).
    if not skill.strip() and status == "loaded" and call.arguments is not None:
        status, message = "failed", "no skill name given"
    body = None
    if status == "loaded":
        body = body_of(family.text(), skill)
    return skill_shapes.skill_tool_load(call, skill, status, message, body)


def named_in_error(error: str) -> str:
    """The skill a failed call asked for, as its error names it (``tool_span_facts.SKILL_IN_ERRORS``),
    for a call whose arguments were not recorded; "" when it names none."""
    for pattern in tool_span_facts.SKILL_IN_ERRORS:
        found = pattern.search(error)
        if found is not None:
            return next(group for group in found.groups() if group is not None).strip()
    return ""


def skill_argument(arguments: Any, key: str) -> Any:
    """What a skill tool's arguments give for the skill: under the key its row names, else
    under the first of ``skill_tool_facts.SKILL_NAME_KEYS`` present (one tool name, ``skill``, is
    written by harnesses with different argument names); arguments that are no dict (a
    single-argument tool's bare string) as they are."""
    if not isinstance(arguments, dict):
        return arguments
    if key in arguments:
        return arguments[key]
    return next((arguments[k] for k in skill_tool_facts.SKILL_NAME_KEYS if k in arguments), None)


def body_of(text: str, skill: str) -> str | None:
    """The instructions a skill tool's result holds for ``skill``: the body of a SKILL.md it
    returned, else the text itself, unless that only acknowledges the load."""
    document = documents.find(text)
    return document.body if document else _body_without_ack(text, skill)


def _body_without_ack(text: str, skill: str) -> str | None:
    """None for a one-line acknowledgement of a load (short, or a little longer and naming
    ``skill``): a load without its body; anything else is the instructions themselves."""
    stripped = text.strip()
    if "\n" not in stripped and (
        len(stripped) < skill_tool_facts.SKILL_ACK_MAX_CHARS
        or (
            len(stripped) < skill_tool_facts.SKILL_NAMED_ACK_MAX_CHARS
            and skill
            and skill.casefold() in stripped.casefold()
        )
    ):
        return None
    return stripped or None
