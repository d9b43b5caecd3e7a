"""custom.<name>: the operator's own judge evaluators, triggered as AgentCore's custom ones.

The instructions may reference ``{invoked_skill}``, ``{skill_content}``,
``{available_skills}``, ``{user_message}``, ``{context}``, ``{available_tools}`` and
``{tool_turn}``.  What they reference decides where the evaluator runs:

- ``skill_content``: once per distinct loaded skill, on the whole session (as instruction
  following; not applicable without a body);
- else ``invoked_skill``: once per skill load, with the context before it (as selection);
- else level ``tool_call``: once per tool call, with the context before it;
- else (level ``session``): once per session.

The instructions are the operator's and trusted; each placeholder becomes a reference to
a fenced data block, so recorded text never lands in the instructions.
"""

from __future__ import annotations

import re

from evaluators import context
from evaluators.bodies import skill_uses
from evaluators.evidence import Session
from evaluators.judge import prompt
from evaluators.plan import (
    CustomSpec,
    ResolvedCatalog,
    Settings,
    Slot,
    gate,
    not_applicable,
    resolve_catalog,
    task,
)

PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")


def referenced(spec: CustomSpec) -> set[str]:
    return set(PLACEHOLDER.findall(spec.instructions))


def rubric_text(spec: CustomSpec) -> str:
    instructions = PLACEHOLDER.sub(lambda m: f"[the '{m.group(1)}' data block]", spec.instructions)
    return f"{prompt.template('custom')}\n\nOperator instructions:\n{instructions}"


def plan(
    session: Session, settings: Settings, spec: CustomSpec, catalog: ResolvedCatalog | None = None
) -> list[Slot]:
    """``spec``'s slots for the session.  ``catalog``: the session's ``resolve_catalog``, when
    the caller has it."""
    refs = referenced(spec)
    catalog = catalog if catalog is not None else resolve_catalog(session, settings.registry)
    name = spec.evaluation
    slots: list[Slot] = []
    if "skill_content" in refs:
        for use in skill_uses(session, settings.registry):
            where = {**use.where, "catalog_source": catalog.source if "available_skills" in refs else None}
            if not use.loaded:
                slots.append(
                    not_applicable(
                        name, session, use.not_loaded_reason, f"'{use.name}' was not loaded", where
                    )
                )
            elif not use.body:
                slots.append(
                    not_applicable(
                        name, session, "body_unavailable", f"no instructions for '{use.name}'", where
                    )
                )
            else:
                values = {
                    "invoked_skill": use.name,
                    "skill_content": use.body,
                    "user_message": _user_message(session, context.load_time(session, use.anchor)),
                    "context": context.trajectory(session),
                }
                slots.append(_task(session, settings, spec, refs, catalog, values, where))
        return slots
    if "invoked_skill" in refs:
        for load in session.skill_loads:
            at = context.load_time(session, load)
            where = {
                "skill": load.skill,
                "trace_id": load.trace_id,
                "span_id": load.span_id,
                "signal": load.signal,
                "catalog_source": catalog.source if "available_skills" in refs else None,
            }
            values = {
                "invoked_skill": load.skill,
                "user_message": _user_message(session, at),
                "context": context.trajectory(session, at),
            }
            slots.append(_task(session, settings, spec, refs, catalog, values, where))
        return slots
    if spec.level == "tool_call":
        for call in session.tool_calls:
            at = call.start_unix_nano
            where = {"trace_id": call.trace_id, "span_id": call.span_id}
            values = {
                "user_message": _user_message(session, at),
                "context": context.trajectory(session, at),
                "tool_turn": f"{call.name}({call.arguments or ''}) -> {call.error or call.result or '(no result)'}",
            }
            slots.append(_task(session, settings, spec, refs, catalog, values, where))
        return slots
    first = session.first_agent_span
    where = {"trace_id": first[0] if first else None, "span_id": first[1] if first else None}
    if not context.has_trajectory(session):
        return [
            not_applicable(
                name, session, "no_trajectory", "the session recorded no turns or tool calls", where
            )
        ]
    last = max((t.start_unix_nano for t in session.turns), default=0)
    values = {"user_message": _user_message(session, last), "context": context.trajectory(session)}
    return [_task(session, settings, spec, refs, catalog, values, where)]


def _user_message(session: Session, at: int) -> str:
    turn = context.triggering_turn(session, at)
    return turn.user_message if turn else context.NONE_RECORDED


def _task(
    session: Session,
    settings: Settings,
    spec: CustomSpec,
    refs: set[str],
    catalog: ResolvedCatalog,
    values: dict[str, str],
    where: dict[str, str | None],
) -> Slot:
    skipped = gate(spec.evaluation, session, settings, where)
    if skipped is not None:
        return skipped
    values = {
        **values,
        "available_skills": catalog.text(),
        "available_tools": context.available_tools(session),
    }
    data = []
    for key in ("skill_content", "available_skills"):  # stable per skill / per agent: cached
        if key in refs:
            data.append(
                prompt.Datum(key, values.get(key) or context.NONE_RECORDED, stable=True, truncatable=False)
            )
    for key in ("invoked_skill", "user_message", "tool_turn", "available_tools", "context"):
        if key in refs:
            data.append(
                prompt.Datum(key, values.get(key) or context.NONE_RECORDED, truncatable=key == "context")
            )
    if not data:  # instructions that reference nothing still get the session to look at
        data.append(prompt.Datum("context", values.get("context") or context.NONE_RECORDED))
    return task(spec.evaluation, session, settings, rubric_text(spec), spec.scale, data, where)
