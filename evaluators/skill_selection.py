"""skill_selection_accuracy: was the skill the agent tried to load the right one?  (judge)

One result per skill load, failed and denied loads included (a refused load is judged as
a choice, with the harness's message).  Inputs as AgentCore's
``Builtin.SkillSelectionAccuracy``: the invoked skill, the available skills (the trace's
catalog, else the operator's registry, else "not recorded"), the user message of the turn
that triggered the load, and the context *before* the load.  Yes = 1.0 passes, No = 0.0.
"""

from __future__ import annotations

from evaluators import context
from evaluators.evidence import Session, SkillLoad
from evaluators.judge import prompt
from evaluators.judge.verdicts import SELECTION
from evaluators.plan import ResolvedCatalog, Settings, Slot, gate, not_applicable, resolve_catalog, task

NAME = "skill_selection_accuracy"


def plan(session: Session, settings: Settings, catalog: ResolvedCatalog | None = None) -> list[Slot]:
    """One slot per skill load.  ``catalog``: the session's ``resolve_catalog``, when the
    caller has it."""
    catalog = catalog if catalog is not None else resolve_catalog(session, settings.registry)
    slots: list[Slot] = []
    for load in session.skill_loads:
        where = {
            "skill": load.skill,
            "trace_id": load.trace_id,
            "span_id": load.span_id,
            "signal": load.signal,
            "catalog_source": catalog.source,
        }
        at = context.load_time(session, load)
        turn = context.triggering_turn(session, at)
        if turn is None and not context.has_context_before(session, at):
            slots.append(
                not_applicable(
                    NAME, session, "no_trajectory", "no user request or earlier context was recorded", where
                )
            )
            continue
        skipped = gate(NAME, session, settings, where)
        if skipped is not None:
            slots.append(skipped)
            continue
        before = context.trajectory(session, at)
        data = [
            prompt.Datum("available_skills", catalog.text(), stable=True, truncatable=False),
            prompt.Datum("decision_under_evaluation", _decision(load), truncatable=False),
            prompt.Datum("user_message", turn.user_message if turn else context.NONE_RECORDED),
            prompt.Datum("context_before_the_call", before or context.NONE_RECORDED),
        ]
        slots.append(task(NAME, session, settings, prompt.template(NAME), SELECTION, data, where))
    return slots


def _decision(load: SkillLoad) -> str:
    lines = [f"invoked_skill: {load.skill or '(no name given)'}", f"outcome: {load.status}"]
    if load.message:
        lines.append(f"harness message: {load.message}")
    return "\n".join(lines)
