"""Which skills a session used, and the instructions to judge them against.

The trace's body wins; the operator's registry fills in when the trace has none (Claude
Code's ``Launching skill: x``, ADK without content capture).  A traced body that differs
from the registry's copy is reported (a skill changed under a running agent).
"""

from __future__ import annotations

from typing import NamedTuple

from evaluators import skill_md
from evaluators.evidence import Session, SkillLoad
from evaluators.registry import SkillRegistry, same_body
from evaluators.result import BodySource


class SkillUse(NamedTuple):
    """All loads of one skill (folded name) in a session.  A named tuple: every session's
    plan makes one a skill, and a frozen dataclass sets each field through ``object.__setattr__``."""

    name: str
    loads: tuple[SkillLoad, ...]
    anchor: SkillLoad  # the load results are parented to
    loaded: bool
    body: str | None
    body_source: BodySource
    mismatch: bool  # the traced body differs from the registry's
    not_loaded_reason: str = ""  # load_failed | load_denied | unresolved when not loaded

    @property
    def where(self) -> dict[str, str | None]:
        return {
            "skill": self.name,
            "trace_id": self.anchor.trace_id,
            "span_id": self.anchor.span_id,
            "signal": self.anchor.signal,
            "body_source": self.body_source,
        }


def instructions_of(traced: str) -> str:
    """A traced SKILL.md without its frontmatter (harnesses return either form)."""
    doc = skill_md.try_parse(traced)
    return doc.body if doc is not None else skill_md.strip_line_numbers(traced).strip()


def skill_uses(session: Session, registry: SkillRegistry) -> list[SkillUse]:
    groups: dict[str, list[SkillLoad]] = {}
    for load in session.skill_loads:
        groups.setdefault(load.key, []).append(load)
    return [_use(loads, registry) for loads in groups.values()]


def _use(loads: list[SkillLoad], registry: SkillRegistry) -> SkillUse:
    loaded = [load for load in loads if load.status == "loaded"]
    with_body = [load for load in loaded if load.has_body]
    name = (loaded or loads)[0].skill
    registered = registry.get(name) if name else None
    if not loaded:
        statuses = {load.status for load in loads}
        reason = (
            "load_failed" if "failed" in statuses else "load_denied" if "denied" in statuses else "unresolved"
        )
        return SkillUse(name, tuple(loads), loads[-1], False, None, "none", False, reason)
    if with_body:
        body = instructions_of(with_body[0].body or "")
        mismatch = registered is not None and not same_body(with_body[0].body or "", registered.body)
        return SkillUse(name, tuple(loads), with_body[0], True, body, "trace", mismatch)
    if registered is not None:
        return SkillUse(name, tuple(loads), loaded[0], True, registered.body, "registry", False)
    return SkillUse(name, tuple(loads), loaded[0], True, None, "none", False)
