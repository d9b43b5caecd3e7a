"""Evaluation results and the per-session coverage summary.

The one rule this module enforces: only a ``judged`` result carries a score, a label and a
``passed`` flag.  Anything not judged (not applicable, skipped, error) has ``passed=None``;
a missing verdict can never be read as a pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from evaluators.evidence import LOAD_STATUSES, Because, Session, Turn, fold_skill_name, session_key

Status = Literal["judged", "not_applicable", "skipped", "error"]
STATUSES: tuple[Status, ...] = ("judged", "not_applicable", "skipped", "error")
BodySource = Literal["trace", "registry", "none"]


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    context_truncated: bool = False


_set = object.__setattr__  # how a frozen result's dict is set, once, as it is made


@dataclass(frozen=True, init=False)
class EvaluationResult:
    """One row of a session's account.  Only a judged row carries a score, a label and
    ``passed``; any other status never counts as a pass (``passed`` is None).

    Frozen, and checked as it is made.  ``__init__`` is written out rather than generated:
    a generated frozen one sets each of the 18 fields through ``object.__setattr__``, which
    made up a quarter of planning a session; this one sets the instance's dict at once.  Its
    parameters are the fields, in order, with their defaults (``tests/evaluators``)."""

    evaluation: str
    status: Status
    reason: str
    session_id: str
    revision: int
    trace_id: str | None = None
    span_id: str | None = None
    skill: str | None = None
    framework: str | None = None
    signal: str | None = None
    score: float | None = None
    label: str | None = None
    passed: bool | None = None
    explanation: str = ""
    body_source: BodySource | None = None
    catalog_source: BodySource | None = None
    judge: JudgeUsage | None = None
    tenant: str = ""  # the session's tenant; a record names it only when it is not ""

    def __init__(
        self,
        evaluation: str,
        status: Status,
        reason: str,
        session_id: str,
        revision: int,
        trace_id: str | None = None,
        span_id: str | None = None,
        skill: str | None = None,
        framework: str | None = None,
        signal: str | None = None,
        score: float | None = None,
        label: str | None = None,
        passed: bool | None = None,
        explanation: str = "",
        body_source: BodySource | None = None,
        catalog_source: BodySource | None = None,
        judge: JudgeUsage | None = None,
        tenant: str = "",
    ) -> None:
        if status == "judged":
            if score is None or passed is None:
                raise ValueError("a judged result needs a score and passed")
        elif status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        elif score is not None or label is not None or passed is not None:
            raise ValueError(f"a {status} result carries no score, label or passed")
        _set(
            self,
            "__dict__",
            {
                "evaluation": evaluation,
                "status": status,
                "reason": reason,
                "session_id": session_id,
                "revision": revision,
                "trace_id": trace_id,
                "span_id": span_id,
                "skill": skill,
                "framework": framework,
                "signal": signal,
                "score": score,
                "label": label,
                "passed": passed,
                "explanation": explanation,
                "body_source": body_source,
                "catalog_source": catalog_source,
                "judge": judge,
                "tenant": tenant,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        # A copy of the instance's dict (its fields, in order): ``dataclasses.asdict``
        # deep-copies every value, and every closed session turns a dozen results into records.
        record = dict(self.__dict__)
        if not self.tenant:
            del record["tenant"]
        if self.judge is not None:
            record["judge"] = {name: getattr(self.judge, name) for name in _USAGE_FIELDS}
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> EvaluationResult:
        """The inverse of ``to_dict`` (a result read back from storage)."""
        fields = dict(record)
        usage = fields.pop("judge", None)
        return cls(**fields, judge=JudgeUsage(**usage) if usage else None)

    @property
    def key(self) -> str:
        return result_key(
            session_key(self.tenant, self.session_id),
            self.revision,
            self.evaluation,
            self.skill,
            self.span_id,
        )


_USAGE_FIELDS = tuple(f.name for f in fields(JudgeUsage))


# Bump when a result's meaning changes: it is part of every idempotency key, so results
# recorded under an older version are never taken for current ones.
RESULT_VERSION = 1


def result_key(
    session_id: str, revision: int, evaluation: str, skill: str | None, span_id: str | None
) -> str:
    """The idempotency key of a result: session (its ``session_key``), revision, evaluation,
    skill, evaluated span, version."""
    return "\x1f".join(
        (session_id, str(revision), evaluation, skill or "", span_id or "", str(RESULT_VERSION))
    )


def judged(
    evaluation: str,
    session: Session,
    *,
    score: float,
    passed: bool,
    label: str,
    reason: str,
    explanation: str = "",
    **where: Any,
) -> EvaluationResult:
    # The leading fields by position: each keyword is matched against the parameters in turn.
    return EvaluationResult(
        evaluation,
        "judged",
        reason,
        session.session_id,
        session.revision,
        score=score,
        passed=passed,
        label=label,
        explanation=explanation,
        framework=session.framework,
        tenant=session.tenant,
        **where,
    )


def unjudged(
    evaluation: str,
    session: Session,
    status: Status,
    reason: str,
    explanation: str,
    **where: Any,
) -> EvaluationResult:
    return EvaluationResult(
        evaluation,
        status,
        reason,
        session.session_id,
        session.revision,
        explanation=explanation,
        framework=session.framework,
        tenant=session.tenant,
        **where,
    )


# The evaluations whose row counts are fixed by the evidence (see ``Coverage.accounting``).
SELECTION, FOLLOWING, OMISSION = "skill_selection_accuracy", "skill_instruction_following", "skill_omission"


@dataclass(slots=True)
class Coverage:
    """What a session's evaluation did and did not cover.  It must add up."""

    session: Session
    results: list[EvaluationResult] = field(default_factory=list)
    enabled: tuple[str, ...] = (SELECTION, FOLLOWING, OMISSION)  # evaluations configured on

    def accounting(self) -> dict[str, Any]:
        """Rows each evaluation owes the session, and rows it produced.

        Every skill load has one selection row, every distinct skill loaded one following
        row, every session one omission decision, whatever their status.
        """
        return self._accounting(_tally(r.evaluation for r in self.results))

    def _accounting(self, counts: dict[str, int]) -> dict[str, Any]:
        """``accounting`` from the rows each evaluation produced (``counts``)."""
        loads = self.session.skill_loads
        enabled = self.enabled
        selection = {"owed": len(loads) if SELECTION in enabled else 0, "rows": counts.get(SELECTION, 0)}
        following = {
            "owed": len({fold_skill_name(load.skill) for load in loads}) if FOLLOWING in enabled else 0,
            "rows": counts.get(FOLLOWING, 0),
        }
        omission = {"owed": 1 if OMISSION in enabled else 0, "rows": counts.get(OMISSION, 0)}
        return {
            SELECTION: selection,
            FOLLOWING: following,
            OMISSION: omission,
            "adds_up": selection["owed"] == selection["rows"]
            and following["owed"] == following["rows"]
            and omission["owed"] == omission["rows"],
        }

    def judge_totals(self) -> dict[str, Any]:
        return _judge_totals([r.judge for r in self.results if r.judge is not None])

    def to_dict(self) -> dict[str, Any]:
        """The coverage line.  Made once per closed session, so built directly: one pass
        over the results for every tally, keys set in place (no ``**`` merges)."""
        s = self.session
        by_status = dict.fromkeys(STATUSES, 0)
        by_evaluation: dict[str, dict[str, int]] = {}
        rows: dict[str, int] = {}
        met: list[str | None] = []
        missed: list[str | None] = []
        used: list[JudgeUsage] = []
        for r in self.results:
            by_status[r.status] += 1
            evaluation = r.evaluation
            by_reason = by_evaluation.get(evaluation)
            if by_reason is None:
                by_reason = by_evaluation[evaluation] = {}
            key = f"{r.status}/{r.reason}"
            by_reason[key] = by_reason.get(key, 0) + 1
            rows[evaluation] = rows.get(evaluation, 0) + 1
            if evaluation == "skill_invoked":
                if r.passed:
                    met.append(r.skill)
                elif r.passed is False:
                    missed.append(r.skill)
            if r.judge is not None:
                used.append(r.judge)
        loads = s.skill_loads
        loads_by_status = dict.fromkeys(LOAD_STATUSES, 0)
        shown: list[dict[str, Any]] = []
        for load in loads:
            if load.status in loads_by_status:
                loads_by_status[load.status] += 1
            shown_load = {
                "skill": load.skill,
                "status": load.status,
                "signal": load.signal,
                "has_body": bool(load.body),
                "span_id": load.span_id,
                "trace_id": load.trace_id,
            }
            if load.body_cut:
                shown_load["body_truncated"] = True
                shown_load["body_chars_cut"] = load.body_cut
            shown.append(shown_load)
        turns = s.turns
        catalog = s.catalog
        catalog_line: dict[str, Any] = {
            "state": catalog.state,
            "skills": sorted([e.name for e in catalog.skills.values()]),
        }
        if catalog.truncated:
            catalog_line["truncated"] = True
            catalog_line["entries_not_kept"] = catalog.truncated
        line: dict[str, Any] = {"session_id": s.session_id}
        if s.tenant:
            line["tenant"] = s.tenant
        line["revision"] = s.revision
        line["trace_id"] = _session_trace(s)
        line["framework"] = s.framework
        line["close_reason"] = s.close_reason
        line["spans"] = s.span_count
        line["content_capture"] = s.content_capture
        if s.key_source:
            line["key_source"] = s.key_source
        # What the user asked in each turn, in the user's own words (injected context
        # removed), the first ``MAX_REQUESTS_LISTED`` each cut at ``MAX_REQUEST_CHARS``; and
        # where the first was read ("not_recorded" when no turn recorded one: rules on user
        # messages matched nothing, and the judges were told so).
        line["turn_count"] = len(turns)
        line["user_requests"] = [user_request(t)[:MAX_REQUEST_CHARS] for t in turns[:MAX_REQUESTS_LISTED]]
        line["user_request_source"] = (turns[0].source or "recorded") if turns else "not_recorded"
        line["catalog"] = catalog_line
        line["skill_loads"] = shown
        line["loads_by_status"] = loads_by_status
        line["expectations"] = {
            "expected": list(s.expected_skills),
            "met": met,
            "missed": missed,
            "state": "declared" if s.expected_skills else "none",
            "why": {skill: _because(because) for skill, because in s.expected_because.items()},
        }
        line["turns"] = [
            {"request": _cut(user_request(turn)), "trace_id": turn.trace_id, "span_id": turn.span_id}
            for turn in turns[:MAX_TURNS_SHOWN]
        ]
        line["results_by_status"] = by_status
        line["evaluations"] = by_evaluation
        line["accounting"] = self._accounting(rows)
        line["judge"] = _judge_totals(used) if used else _no_judge_totals()
        if s.unreadable_count:
            line.update(_unreadable(s))
        return line


# The coverage line names each turn's request, cut, for the session page; the evidence itself
# (the whole request) is the judge's.
MAX_TURNS_SHOWN = 50


def user_request(turn: Turn) -> str:
    """What the user asked in ``turn``: the text detection takes as the user's own words.
    Every reader of a turn's request goes through here."""
    return turn.user_message


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REQUEST_CHARS else text[:MAX_REQUEST_CHARS] + " [...]"


MAX_REQUESTS_LISTED = 20  # requests a coverage line lists (``turn_count`` counts them all)
MAX_REQUEST_CHARS = 2000  # characters of each listed request


def _unreadable(s: Session) -> dict[str, Any]:
    """Items of the session that could not be read: counted, the first few named."""
    return {
        "unreadable": {
            "count": s.unreadable_count,
            "items": [
                {
                    "kind": u.kind,
                    "trace_id": u.trace_id,
                    "span_id": u.span_id,
                    "reason": u.reason,
                    "detail": u.detail,
                }
                for u in s.unreadable
            ],
        }
    }


def _session_trace(session: Session) -> str | None:
    """The trace session-level results are parented to: the first agent span's, else the
    first turn's, tool call's or load's (hex), None when the session recorded none."""
    if session.first_agent_span is not None:
        return session.first_agent_span[0]
    for found in (session.turns, session.tool_calls, session.skill_loads):
        if found:
            return found[0].trace_id
    return None


def _tally(values: Iterable[str]) -> dict[str, int]:
    # Not ``collections.Counter``: its methods are interpreted, and every session counts three times.
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _no_judge_totals() -> dict[str, Any]:
    """``_judge_totals([])``, without six sums over nothing."""
    return {
        "rows": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0,
        "context_truncated": 0,
    }


def _judge_totals(used: list[JudgeUsage]) -> dict[str, Any]:
    """What the judge calls behind ``used`` (one a judged row) cost, summed."""
    return {
        "rows": len(used),
        "input_tokens": sum(u.input_tokens for u in used),
        "output_tokens": sum(u.output_tokens for u in used),
        "cache_read_tokens": sum(u.cache_read_tokens for u in used),
        "cache_write_tokens": sum(u.cache_write_tokens for u in used),
        "cost_usd": round(sum(u.cost_usd for u in used), 8),
        "context_truncated": sum(1 for u in used if u.context_truncated),
    }


def _because(because: Because) -> dict[str, str]:
    """``dataclasses.asdict`` of a ``Because``, without its deep copy."""
    return {name: getattr(because, name) for name in _BECAUSE_FIELDS}


_BECAUSE_FIELDS = tuple(f.name for f in fields(Because))
