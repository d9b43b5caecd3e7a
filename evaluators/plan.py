"""What the evaluators decide before any judge is called.

An evaluator turns a closed session into *slots*, in a fixed order: a finished
``EvaluationResult`` (deterministic rows, not-applicable and skipped rows) or a
``JudgeTask`` (a prompt that still needs a verdict).  The collector's runner fills the
tasks in concurrently; the order of the slots is the order of the results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from evaluators import registry as registry_mod
from evaluators.evidence import CatalogEntry, Session
from evaluators.judge import prompt
from evaluators.judge.base import JudgeRequest
from evaluators.judge.sampling import sampled_in
from evaluators.judge.verdicts import Rubric, Scale
from evaluators.registry import SkillRegistry
from evaluators.result import BodySource, EvaluationResult, unjudged

DEFAULT_MODEL = "claude-sonnet-5-5"


@dataclass(frozen=True, slots=True)
class Policy:
    enabled: bool = True
    sampling: float = 100.0  # percent of sessions
    model: str | None = None


_DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class CustomSpec:
    name: str  # without the "custom." prefix
    level: Literal["tool_call", "session"]
    instructions: str
    scale: Scale
    policy: Policy = Policy()

    @property
    def evaluation(self) -> str:
        return f"custom.{self.name}"


@dataclass(frozen=True)
class Settings:
    """Everything the evaluators need to know about the configuration (no collector types)."""

    judge_configured: bool = False
    model: str = DEFAULT_MODEL
    policies: Mapping[str, Policy] = field(default_factory=dict)
    custom: tuple[CustomSpec, ...] = ()
    registry: SkillRegistry = registry_mod.EMPTY
    max_input_tokens: int = 200_000
    max_tokens: int = 2048

    def policy(self, evaluation: str) -> Policy:
        for spec in self.custom:
            if spec.evaluation == evaluation:
                return spec.policy
        return self.policies.get(evaluation, _DEFAULT_POLICY)

    def model_for(self, evaluation: str) -> str:
        return self.policy(evaluation).model or self.model


@dataclass(frozen=True, slots=True)
class JudgeTask:
    evaluation: str
    session: Session
    request: JudgeRequest
    rubric: Rubric
    where: Mapping[str, Any]  # skill, trace_id, span_id, signal, body_source, catalog_source


Slot = EvaluationResult | JudgeTask


@dataclass
class Plan:
    session: Session
    slots: list[Slot] = field(default_factory=list)
    body_mismatches: list[str] = field(default_factory=list)  # skills whose traced body != registry


# -- shared decisions ------------------------------------------------------------------------


class ResolvedCatalog(NamedTuple):
    """The catalog a session's judges are shown (``resolve_catalog``).  A named tuple: every
    session's plan makes one, and a frozen dataclass sets each field through ``object.__setattr__``."""

    entries: tuple[CatalogEntry, ...]
    source: BodySource
    state: str  # advertised | empty | not_recorded

    def text(self) -> str:
        if self.source == "none":
            return "(not recorded: the trace holds no catalog and no skill registry is configured)"
        if not self.entries:
            return "(none advertised: the agent was shown an empty catalog)"
        return "\n".join(f"- {e.name}: {e.description}" for e in self.entries)

    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)


def resolve_catalog(session: Session, registry: SkillRegistry) -> ResolvedCatalog:
    """The trace's catalog when one was recorded (even empty), else the registry's."""
    if session.catalog.state != "not_recorded":
        return ResolvedCatalog(tuple(session.catalog.skills.values()), "trace", session.catalog.state)
    if len(registry):
        return ResolvedCatalog(registry.entries, "registry", "advertised")
    return ResolvedCatalog((), "none", "not_recorded")


def gate(
    evaluation: str, session: Session, settings: Settings, where: Mapping[str, Any]
) -> EvaluationResult | None:
    """A skipped row when the judge cannot or must not run for this session, else None."""
    if not settings.judge_configured:
        return unjudged(
            evaluation,
            session,
            "skipped",
            "no_judge_configured",
            "no judge is configured (judge.api_key / ANTHROPIC_API_KEY, judge.base_url, or judge.provider "
            "bedrock / vertex): not judged",
            **where,
        )
    percent = settings.policy(evaluation).sampling
    if not sampled_in(session.session_id, evaluation, percent):
        return unjudged(
            evaluation,
            session,
            "skipped",
            "sampled_out",
            f"this session is outside the {percent:g}% sample for {evaluation} (decided by session hash)",
            **where,
        )
    return None


def task(
    evaluation: str,
    session: Session,
    settings: Settings,
    rubric_text: str,
    rubric: Rubric,
    data: list[prompt.Datum],
    where: Mapping[str, Any],
) -> JudgeTask:
    request = prompt.build(
        evaluation,
        settings.model_for(evaluation),
        rubric_text,
        rubric,
        data,
        max_input_tokens=settings.max_input_tokens,
        max_tokens=settings.max_tokens,
    )
    return JudgeTask(evaluation, session, request, rubric, dict(where))


def not_applicable(
    evaluation: str, session: Session, reason: str, explanation: str, where: Mapping[str, Any]
) -> EvaluationResult:
    return unjudged(evaluation, session, "not_applicable", reason, explanation, **where)
