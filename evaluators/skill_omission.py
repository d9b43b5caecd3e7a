"""skill_omission: the session had a catalog and used no skill; should it have?  (judge)

Ours: no peer scores this.  Exactly one decision per session: judged (1.0 when declining
was right, 0.0 when a skill was skipped, naming the skill), or not applicable with the
reason (a skill was loaded, the catalog was empty or not recorded, tool content was not
captured so a file-read load could be invisible, nothing recorded), or skipped with the
reason.  A load that failed or was denied is not use of a skill: the session is judged,
and those attempts are evidence in the prompt (fenced like every recorded string).  A load
whose outcome was not recorded (``unresolved``) may have succeeded, so it counts as use.
"""

from __future__ import annotations

from evaluators import context
from evaluators.evidence import Session, fold_skill_name
from evaluators.judge import prompt
from evaluators.judge.verdicts import OmissionScale
from evaluators.plan import ResolvedCatalog, Settings, Slot, gate, not_applicable, resolve_catalog, task

NAME = "skill_omission"
USED = ("loaded", "unresolved")
NO_ATTEMPTS = "(none: the agent made no unsuccessful attempt to load a skill)"


def unsuccessful_loads(session: Session) -> str:
    """Failed and denied loads, one line each, in the order they happened."""
    lines = [
        f"- {load.skill}: {load.status} ({load.signal})" + (f": {load.message}" if load.message else "")
        for load in sorted(session.skill_loads, key=lambda ld: ld.time_unix_nano)
        if load.status not in USED
    ]
    return "\n".join(lines) if lines else NO_ATTEMPTS


def plan(session: Session, settings: Settings, catalog: ResolvedCatalog | None = None) -> list[Slot]:
    """The session's one slot.  ``catalog``: the session's ``resolve_catalog``, when the caller
    has it."""
    catalog = catalog if catalog is not None else resolve_catalog(session, settings.registry)
    where = {
        "trace_id": session.first_agent_span[0] if session.first_agent_span else None,
        "span_id": session.first_agent_span[1] if session.first_agent_span else None,
        "catalog_source": catalog.source,
    }
    used = [load for load in session.skill_loads if load.status in USED]
    if used:
        n = len(used)
        return [
            not_applicable(
                NAME,
                session,
                "skill_loaded",
                f"the session loaded a skill {n} time{'s' * (n > 1)}"
                + (" (outcome not recorded)" if all(u.status == "unresolved" for u in used) else ""),
                where,
            )
        ]
    if catalog.source == "none":
        return [
            not_applicable(
                NAME,
                session,
                "no_catalog",
                "no catalog was recorded and no skills registry is configured",
                where,
            )
        ]
    if not catalog.entries:
        return [
            not_applicable(
                NAME, session, "empty_catalog", "the agent was shown an empty skill catalog", where
            )
        ]
    if session.content_capture == "missing":
        return [
            not_applicable(
                NAME,
                session,
                "content_not_captured",
                "tool spans carry no arguments or results, so a skill read from a file would be invisible",
                where,
            )
        ]
    if not context.has_trajectory(session):
        return [
            not_applicable(
                NAME, session, "no_trajectory", "the session recorded no turns or tool calls", where
            )
        ]
    skipped = gate(NAME, session, settings, where)
    if skipped is not None:
        return [skipped]
    data = [
        prompt.Datum("available_skills", catalog.text(), stable=True, truncatable=False),
        prompt.Datum("unsuccessful_skill_loads", unsuccessful_loads(session)),
        prompt.Datum("session", context.trajectory(session)),
    ]
    rubric = OmissionScale(catalog.names(), fold_skill_name)
    return [task(NAME, session, settings, prompt.template(NAME), rubric, data, where)]
