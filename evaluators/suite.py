"""Run the evaluators over one closed session and account for what they covered."""

from __future__ import annotations

from evaluators import skill_invoked
from evaluators.evidence import Session
from evaluators.result import Coverage, EvaluationResult


def evaluate(session: Session) -> Coverage:
    results: list[EvaluationResult] = []
    results += skill_invoked.evaluate(session)
    return Coverage(session, results)
