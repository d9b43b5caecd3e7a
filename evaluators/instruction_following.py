"""skill_instruction_following: did the agent follow the skill it loaded?  (judge)

One result per distinct skill loaded, judged on the whole session against the SKILL.md
body (frontmatter stripped): the trace's body, else the operator's registry
(``body_source`` says which).  The judge lists the prescribed steps as covered / partial /
skipped with evidence and rates Fully 1.0 / Mostly 0.75 / Partially 0.5 / Minimally 0.25 /
Not 0.0, consistently with the steps; >= 0.75 passes.  Not applicable: the skill never
loaded (failed, denied, unresolved), no body anywhere, or a body with no steps.
"""

from __future__ import annotations

from evaluators import context
from evaluators.bodies import SkillUse, skill_uses
from evaluators.evidence import Session
from evaluators.judge import prompt
from evaluators.judge.verdicts import FollowingScale
from evaluators.plan import Settings, Slot, gate, not_applicable, task

NAME = "skill_instruction_following"
RUBRIC = FollowingScale()
_NOT_LOADED = {
    "load_failed": "the load failed, so there were no instructions to follow",
    "load_denied": "the harness denied the load, so there were no instructions to follow",
    "unresolved": "the load has no recorded outcome, so it is unknown whether instructions were received",
}


def plan(session: Session, settings: Settings, uses: list[SkillUse] | None = None) -> list[Slot]:
    slots: list[Slot] = []
    for use in uses if uses is not None else skill_uses(session, settings.registry):
        slots.append(_one(session, settings, use))
    return slots


def _one(session: Session, settings: Settings, use: SkillUse) -> Slot:
    where = use.where
    if not use.loaded:
        return not_applicable(
            NAME, session, use.not_loaded_reason, f"'{use.name}': {_NOT_LOADED[use.not_loaded_reason]}", where
        )
    if not use.body:
        return not_applicable(
            NAME,
            session,
            "body_unavailable",
            f"'{use.name}' was loaded but its instructions are neither in the trace nor in the skills registry",
            where,
        )
    if not context.has_trajectory(session):
        return not_applicable(
            NAME, session, "no_trajectory", "the session recorded no turns or tool calls", where
        )
    skipped = gate(NAME, session, settings, where)
    if skipped is not None:
        return skipped
    data = [
        prompt.Datum("skill_content", use.body, stable=True, truncatable=False),
        prompt.Datum("invoked_skill", use.name or "(no name given)", truncatable=False),
        prompt.Datum("session", context.trajectory(session) or context.NONE_RECORDED),
        prompt.Datum("final_response", context.final_response(session) or context.NONE_RECORDED),
    ]
    return task(NAME, session, settings, prompt.template(NAME), RUBRIC, data, where)
