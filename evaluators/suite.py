"""Run the evaluators over one closed session and account for what they covered.

``plan`` is what the collector's runner uses: deterministic rows at once, judge work as
tasks.  ``evaluate`` is the synchronous form for callers without a judge: every judge
evaluation becomes a visible ``skipped / no_judge_configured`` row.
"""

from __future__ import annotations

from dataclasses import replace

from evaluators import custom, instruction_following, skill_invoked, skill_omission, skill_selection
from evaluators.bodies import skill_uses
from evaluators.evidence import Session
from evaluators.plan import Plan, Settings, resolve_catalog
from evaluators.result import Coverage, EvaluationResult

JUDGE_EVALUATIONS = (skill_selection.NAME, instruction_following.NAME, skill_omission.NAME)


def plan(session: Session, settings: Settings) -> Plan:
    result = Plan(session)
    if settings.policy(skill_invoked.NAME).enabled:
        result.slots += skill_invoked.evaluate(session)
    uses = skill_uses(session, settings.registry)
    result.body_mismatches = [use.name for use in uses if use.mismatch]
    catalog = resolve_catalog(session, settings.registry)  # the trace's, else the registry's: once
    if settings.policy(skill_selection.NAME).enabled:
        result.slots += skill_selection.plan(session, settings, catalog)
    if settings.policy(instruction_following.NAME).enabled:
        result.slots += instruction_following.plan(session, settings, uses)
    if settings.policy(skill_omission.NAME).enabled:
        result.slots += skill_omission.plan(session, settings, catalog)
    for spec in settings.custom:
        if spec.policy.enabled:
            result.slots += custom.plan(session, settings, spec, catalog)
    return result


def evaluate(session: Session, settings: Settings | None = None) -> Coverage:
    settings = replace(settings or Settings(), judge_configured=False)
    results = [slot for slot in plan(session, settings).slots if isinstance(slot, EvaluationResult)]
    return Coverage(session, results)
