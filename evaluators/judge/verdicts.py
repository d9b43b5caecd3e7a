"""Rating scales as verdict schemas, and the validation of what the judge returned.

Each schema is valid for structured outputs (``output_config.format``) as well as a tool's
``input_schema``: every object closes with ``additionalProperties: false`` and lists every
property as required, enums hold only strings, numbers or null, and no numeric or length
constraints are used (the JSON Schema subset structured outputs accept).

A verdict that does not fit its scale is *invalid*: the caller retries once, then records
``error / judge_unparseable``.  An invalid verdict never becomes a score.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol


@dataclass(frozen=True, slots=True)
class Reading:
    """What a valid verdict says (``problem`` set: the verdict was invalid)."""

    problem: str = ""
    status: Literal["judged", "not_applicable"] = "judged"
    score: float | None = None
    label: str | None = None
    passed: bool | None = None
    reason: str = ""
    explanation: str = ""
    skill: str | None = None  # omission: the skill that should have been used

    @property
    def valid(self) -> bool:
        return not self.problem


def invalid(problem: str) -> Reading:
    return Reading(problem=problem)


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "judged"


class Rubric(Protocol):
    @property
    def description(self) -> str: ...

    def schema(self) -> dict[str, Any]: ...

    def read(self, tool_input: dict[str, Any] | None) -> Reading: ...

    def definitions(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Level:
    label: str
    value: float
    definition: str


def _reasoning(tool_input: dict[str, Any] | None) -> str | Reading:
    """The verdict's reasoning, or the invalid reading every scale starts by checking for."""
    if tool_input is None:
        return invalid("the reply holds no verdict")
    text = tool_input.get("reasoning")
    if not isinstance(text, str) or not text.strip():
        return invalid("'reasoning' is missing or empty")
    return text.strip()


@dataclass(frozen=True, slots=True)
class Scale:
    """A rating scale: categorical (the judge names a label) or numerical (it names a value)."""

    levels: tuple[Level, ...]
    pass_threshold: float
    kind: Literal["categorical", "numerical"] = "categorical"
    description: str = "Record your verdict. Call this exactly once."

    def definitions(self) -> str:
        return "\n".join(f"- {lv.label} ({lv.value:g}): {lv.definition}" for lv in self.levels)

    def rating_schema(self) -> dict[str, Any]:
        if self.kind == "numerical":
            return {"type": "number", "enum": [lv.value for lv in self.levels]}
        return {"type": "string", "enum": [lv.label for lv in self.levels]}

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "description": "Your reasoning, citing the evidence."},
                "rating": self.rating_schema(),
            },
            "required": ["reasoning", "rating"],
            "additionalProperties": False,
        }

    def level(self, rating: Any) -> Level | None:
        for lv in self.levels:
            if self.kind == "numerical":
                if (
                    isinstance(rating, int | float)
                    and not isinstance(rating, bool)
                    and float(rating) == lv.value
                ):
                    return lv
            elif isinstance(rating, str) and rating.strip().lower() == lv.label.lower():
                return lv
        return None

    def judged(self, lv: Level, explanation: str) -> Reading:
        return Reading(
            score=lv.value,
            label=lv.label,
            passed=lv.value >= self.pass_threshold,
            reason=slug(lv.label),
            explanation=explanation,
        )

    def read(self, tool_input: dict[str, Any] | None) -> Reading:
        reasoning = _reasoning(tool_input)
        if isinstance(reasoning, Reading):
            return reasoning
        assert tool_input is not None
        lv = self.level(tool_input.get("rating"))
        if lv is None:
            allowed = ", ".join(repr(x) for x in self.rating_schema()["enum"])
            return invalid(f"'rating' {tool_input.get('rating')!r} is not one of {allowed}")
        return self.judged(lv, reasoning)


SELECTION = Scale(
    (
        Level(
            "Yes",
            1.0,
            "The invoked skill was the right choice for the user's request given the skills available.",
        ),
        Level("No", 0.0, "Another skill, or no skill at all, would have served the request better."),
    ),
    pass_threshold=1.0,
)

FOLLOWING_LEVELS = (
    Level("Fully Followed", 1.0, "Every prescribed step that applies was carried out."),
    Level("Mostly Followed", 0.75, "The main steps were carried out; minor ones were partial or missed."),
    Level("Partially Followed", 0.5, "About half of the steps were carried out."),
    Level("Minimally Followed", 0.25, "Only a small part of the instructions was followed."),
    Level("Not Followed", 0.0, "The instructions were ignored."),
)
STEP_STATUSES = ("covered", "partial", "skipped")


@dataclass(frozen=True, slots=True)
class FollowingScale:
    """Instruction following: the steps first, then a rating that must agree with them."""

    scale: Scale = Scale(FOLLOWING_LEVELS, pass_threshold=0.75)
    description: str = (
        "Record the prescribed steps with their status, then the rating. Call this exactly once."
    )

    def definitions(self) -> str:
        return self.scale.definitions()

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "steps": {
                    "type": "array",
                    "description": "Every step the skill prescribes (for decision trees only the branch taken). "
                    "Empty when the skill prescribes no steps.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": list(STEP_STATUSES)},
                            "evidence": {"type": "string"},
                        },
                        "required": ["step", "status", "evidence"],
                        "additionalProperties": False,
                    },
                },
                "rating": self.scale.rating_schema(),
            },
            "required": ["reasoning", "steps", "rating"],
            "additionalProperties": False,
        }

    def read(self, tool_input: dict[str, Any] | None) -> Reading:
        reasoning = _reasoning(tool_input)
        if isinstance(reasoning, Reading):
            return reasoning
        assert tool_input is not None
        steps = tool_input.get("steps")
        if not isinstance(steps, list):
            return invalid("'steps' must be a list")
        statuses: list[str] = []
        lines: list[str] = []
        for i, step in enumerate(steps):
            if not isinstance(step, dict) or step.get("status") not in STEP_STATUSES or not step.get("step"):
                return invalid(f"steps[{i}] needs 'step' and a 'status' of {', '.join(STEP_STATUSES)}")
            statuses.append(str(step["status"]))
            lines.append(f"[{step['status']}] {step['step']}: {step.get('evidence', '')}")
        if not steps:
            return Reading(status="not_applicable", reason="no_steps", explanation=reasoning)
        lv = self.scale.level(tool_input.get("rating"))
        if lv is None:
            return invalid(f"'rating' {tool_input.get('rating')!r} is not one of the five following levels")
        problem = _disagreement(statuses, lv.value)
        if problem:
            return invalid(problem)
        return self.scale.judged(lv, reasoning + "\nSteps:\n" + "\n".join(lines))


def _disagreement(statuses: list[str], score: float) -> str:
    """The rating must agree with the step breakdown."""
    if all(s == "covered" for s in statuses) and score < 0.75:
        return "every step is covered but the rating is below Mostly Followed"
    if all(s == "skipped" for s in statuses) and score > 0.25:
        return "every step is skipped but the rating is above Minimally Followed"
    if score == 1.0 and "skipped" in statuses:
        return "a step is skipped but the rating is Fully Followed"
    return ""


@dataclass(frozen=True, slots=True)
class OmissionScale:
    """Should a skill have been used in a session that used none?  1.0: declining was right."""

    catalog: tuple[str, ...]
    fold: Callable[[str], str]  # how skill names compare (the evidence's rule)
    description: str = "Record whether a skill should have been used, and which. Call this exactly once."

    def definitions(self) -> str:
        return (
            "- correctly_declined (1.0): no advertised skill fits the requests; answering without one was right.\n"
            "- skill_omitted (0.0): an advertised skill fits a request and should have been used; name it."
        )

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "should_have_used_skill": {"type": "boolean"},
                "skill": {
                    "type": ["string", "null"],
                    # Only an advertised name (or null) fits: a verdict cannot name a skill
                    # outside the catalog, so none is rejected and billed twice for it.
                    "enum": [*self.catalog, None],
                    "description": "The advertised skill that should have been used, exactly as the "
                    "catalog spells it; null when none should have been.",
                },
            },
            "required": ["reasoning", "should_have_used_skill", "skill"],
            "additionalProperties": False,
        }

    def read(self, tool_input: dict[str, Any] | None) -> Reading:
        reasoning = _reasoning(tool_input)
        if isinstance(reasoning, Reading):
            return reasoning
        assert tool_input is not None
        should = tool_input.get("should_have_used_skill")
        if not isinstance(should, bool):
            return invalid("'should_have_used_skill' must be true or false")
        skill = tool_input.get("skill")
        if not should:
            return Reading(
                score=1.0,
                label="correctly_declined",
                passed=True,
                reason="correctly_declined",
                explanation=reasoning,
            )
        known = {self.fold(n): n for n in self.catalog}
        if not isinstance(skill, str) or self.fold(skill) not in known:
            return invalid(
                f"'skill' {skill!r} must name one of the advertised skills: {', '.join(self.catalog)}"
            )
        return Reading(
            score=0.0,
            label="skill_omitted",
            passed=False,
            reason="skill_omitted",
            explanation=reasoning,
            skill=known[self.fold(skill)],
        )
