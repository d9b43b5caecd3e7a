"""skill_invoked: for each skill a session was expected to load, was it loaded?

Deterministic.  Passes only if some load of that skill (folded name) has status
``loaded``.  The reason tells apart not invoked, failed (with attempts and the last
error), denied, and requested with no recorded outcome.  A session with no expectation
yields no row; its coverage line says ``expectations: none``.
"""

from __future__ import annotations

from evaluators.evidence import Session, SkillLoad
from evaluators.result import EvaluationResult, judged

NAME = "skill_invoked"


def evaluate(session: Session) -> list[EvaluationResult]:
    return [_check(session, skill) for skill in session.expected_skills]


def _check(session: Session, skill: str) -> EvaluationResult:
    loads = session.loads_of(skill)
    loaded = [load for load in loads if load.status == "loaded"]
    if loaded:
        return _row(session, skill, loaded[0], True, "loaded", f"'{skill}' was loaded ({loaded[0].signal})")
    anchor = loads[-1] if loads else None
    if not loads:
        return _row(session, skill, None, False, "not_invoked", f"'{skill}' was expected but never invoked")
    failed = [load for load in loads if load.status == "failed"]
    if failed:
        last = failed[-1].message or "no message recorded"
        return _row(
            session,
            skill,
            anchor,
            False,
            "load_failed",
            f"'{skill}' load failed ({len(failed)} attempt{'s' if len(failed) > 1 else ''}); last error: {last}",
        )
    if any(load.status == "denied" for load in loads):
        return _row(
            session, skill, anchor, False, "load_denied", f"'{skill}' was requested but the harness denied it"
        )
    return _row(
        session, skill, anchor, False, "unresolved", f"'{skill}' was requested but no outcome was recorded"
    )


def _row(
    session: Session, skill: str, load: SkillLoad | None, passed: bool, reason: str, explanation: str
) -> EvaluationResult:
    trace_id, span_id = (load.trace_id, load.span_id) if load else (session.first_agent_span or (None, None))
    return judged(
        NAME,
        session,
        score=1.0 if passed else 0.0,
        passed=passed,
        label="loaded" if passed else "not_loaded",
        reason=reason,
        explanation=explanation,
        skill=skill,
        trace_id=trace_id,
        span_id=span_id,
        signal=load.signal if load else None,
    )
