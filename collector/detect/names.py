"""Which recorded values are skill names.

A harness records the name a model asked for, and models ask for anything: JSON text
(``{"name":"pdf-report"}`` inside a JSON string), a sentence, a path.  ``decoded`` takes
a name out of JSON text; ``plausible`` says whether a value may be reported as a skill's
name at all: the Agent Skills spec's rule (1-64 characters of a-z, 0-9 and single inner
hyphens), each part of a namespaced name (``plugin:skill``, ``ns/skill``) by that rule, or
any name the session's catalog advertises (compared case-insensitively, ``_`` as ``-``).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from collector.detect.content import parse_json
from collector.detect.facts import skill_tools as skill_tool_facts
from evaluators.evidence import fold_skill_name
from evaluators.skill_md import NAME

MAX_NAME_CHARS = 64  # the spec's maximum, for a name or each part of a namespaced one
_DEPTH = 4  # JSON text inside JSON text, this many levels at most


def decoded(value: Any) -> str:
    """The name a recorded value holds: a string as it is (stripped), JSON text decoded
    (an object's first name key, a JSON string's text); "" when it holds none."""
    for _ in range(_DEPTH):
        if isinstance(value, dict):
            value = next(
                (value[k] for k in skill_tool_facts.SKILL_NAME_KEYS if isinstance(value.get(k), str)), None
            )
            continue
        if not isinstance(value, str):
            return ""
        stripped = value.strip()
        inner = parse_json(stripped)
        if inner is None or inner == stripped:
            return stripped
        value = inner
    return value.strip() if isinstance(value, str) else ""


def plausible(name: str, advertised: Container[str] = ()) -> bool:
    """Whether ``name`` may be reported as a skill's name (``advertised``: the folded names
    of the session's catalog)."""
    if not name or len(name) > 4 * MAX_NAME_CHARS:
        return False
    if fold_skill_name(name) in advertised:
        return True
    for part in skill_tool_facts.SKILL_NAMESPACE_SEPARATORS.split(name):
        if not (0 < len(part) <= MAX_NAME_CHARS and NAME.match(part)):
            return False
    return True
