"""Turn one ``JudgeTask`` into a result: budget, call, validate, retry once, account.

The only place where a verdict becomes a score.  A verdict that does not fit the rating
scale is retried once (with a note saying what was wrong), then recorded as ``error /
judge_unparseable``; a reply that stopped before any verdict (a refusal, or cut at
``max_tokens``) is recorded at once as ``error / judge_refused`` or ``judge_truncated``.  Every call's tokens and cost are charged to the budgets and land on
the row (``judge``), whatever its status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evaluators.judge.base import (
    STOP_REASONS,
    Judge,
    JudgeFailure,
    JudgeObserver,
    JudgeReply,
    NullObserver,
)
from evaluators.judge.budget import Budgets, Reservation, SessionTokens
from evaluators.judge.pricing import Prices
from evaluators.judge.prompt import estimate_tokens, with_retry_note
from evaluators.judge.verdicts import invalid
from evaluators.plan import JudgeTask
from evaluators.result import EvaluationResult, JudgeUsage, judged, unjudged

INVALID_VERDICT_ATTEMPTS = 2  # the first verdict and one retry


@dataclass
class JudgeEnv:
    judge: Judge
    prices: Callable[[str], Prices | None]
    budgets: Callable[[str, str], Budgets]  # by evaluation and tenant
    observer: JudgeObserver = field(default_factory=NullObserver)
    session_tokens: SessionTokens = field(default_factory=lambda: SessionTokens(None))


@dataclass
class _Tally:
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_s: float = 0.0
    cost: float = 0.0  # stays 0.0 only for a model without a price (the config requires one)

    def add(self, reply: JudgeReply, prices: Prices | None) -> float:
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.cache_read += reply.cache_read_tokens
        self.cache_write += reply.cache_write_tokens
        self.latency_s += reply.latency_s
        if prices is None:
            return 0.0
        usd = prices.cost(
            reply.input_tokens, reply.output_tokens, reply.cache_read_tokens, reply.cache_write_tokens
        )
        self.cost += usd
        return usd

    def usage(self, truncated: bool) -> JudgeUsage:
        return JudgeUsage(
            model=self.model,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            latency_ms=round(self.latency_s * 1000, 3),
            cost_usd=round(self.cost, 8),
            context_truncated=truncated,
        )


def _input_tokens(reply: JudgeReply) -> int:
    return reply.input_tokens + reply.cache_read_tokens + reply.cache_write_tokens


def _billed_tokens(reply: JudgeReply) -> int:
    return reply.input_tokens + reply.output_tokens + reply.cache_read_tokens + reply.cache_write_tokens


async def execute(task: JudgeTask, env: JudgeEnv) -> EvaluationResult:
    request, session, where = task.request, task.session, dict(task.where)
    model = request.model
    prices = env.prices(model)
    budgets = env.budgets(task.evaluation, session.tenant)
    tally = _Tally(model)
    problems: list[str] = []
    key = (session.key, session.revision)
    for attempt in range(INVALID_VERDICT_ATTEMPTS):
        est_in = estimate_tokens(request.chars())
        est_usd = prices.cost(est_in, request.max_tokens) if prices else 0.0
        refusal = env.session_tokens.refusal(key, est_in)
        reservations: list[Reservation] = []
        if refusal is None:
            reservations, refusal = budgets.try_reserve(est_in + request.max_tokens, est_usd)
        if refusal is not None:
            if attempt == 0:
                return unjudged(task.evaluation, session, "skipped", "budget_exhausted", refusal, **where)
            return _unparseable(task, tally, [*problems, f"no retry: {refusal}"], where)
        env.session_tokens.charge(key, est_in)
        try:
            reply = await env.judge.complete(request)
        except JudgeFailure as failure:
            budgets.settle(reservations, 0, 0.0)
            env.session_tokens.charge(key, -est_in)
            tally.latency_s += failure.latency_s
            return unjudged(
                task.evaluation,
                session,
                "error",
                failure.reason,
                f"the judge did not answer: {failure}",
                judge=tally.usage(request.context_truncated),
                **where,
            )
        usd = tally.add(reply, prices)
        budgets.settle(reservations, _billed_tokens(reply), usd)
        env.session_tokens.charge(key, _input_tokens(reply) - est_in)
        env.observer.billed(model, "input", reply.input_tokens)
        env.observer.billed(model, "output", reply.output_tokens)
        env.observer.billed(model, "cache_read", reply.cache_read_tokens)
        env.observer.billed(model, "cache_write", reply.cache_write_tokens)
        env.observer.spent(model, usd)
        if reply.stopped:
            env.observer.request(model, "unparseable", reply.latency_s)
            return unjudged(
                task.evaluation,
                session,
                "error",
                STOP_REASONS[reply.stopped],
                "; ".join([*problems, reply.problem]),
                judge=tally.usage(request.context_truncated),
                **where,
            )
        reading = invalid(reply.problem) if reply.problem else task.rubric.read(reply.tool_input)
        env.observer.request(model, "ok" if reading.valid else "unparseable", reply.latency_s)
        if not reading.valid:
            problems.append(reading.problem)
            request = with_retry_note(request, reading.problem)
            continue
        usage = tally.usage(request.context_truncated)
        if reading.skill is not None:
            where["skill"] = reading.skill
        if reading.status == "not_applicable":
            return unjudged(
                task.evaluation,
                session,
                "not_applicable",
                reading.reason,
                reading.explanation,
                judge=usage,
                **where,
            )
        if (
            reading.score is None or reading.passed is None or reading.label is None
        ):  # a scale bug, not a verdict
            return _unparseable(task, tally, [*problems, "the rubric produced no score"], where)
        return judged(
            task.evaluation,
            session,
            score=reading.score,
            passed=reading.passed,
            label=reading.label,
            reason=reading.reason,
            explanation=reading.explanation,
            judge=usage,
            **where,
        )
    return _unparseable(task, tally, problems, where)


def _unparseable(
    task: JudgeTask, tally: _Tally, problems: list[str], where: dict[str, object]
) -> EvaluationResult:
    return unjudged(
        task.evaluation,
        task.session,
        "error",
        "judge_unparseable",
        "the judge's verdict did not fit the rating scale: " + "; ".join(problems),
        judge=tally.usage(task.request.context_truncated),
        **where,
    )
