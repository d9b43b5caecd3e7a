"""How the evaluate stage calls the judge: ``judge_env`` builds what ``execute`` needs (the
client, prices, budgets shared by every call) from the config."""

from __future__ import annotations

import time
from collections.abc import Callable

from collector.evaluate.config import Budget as BudgetConfig
from collector.evaluate.config import Evaluation
from collector.evaluate.execute import JudgeEnv
from collector.evaluate.retry import RetryPolicy
from evaluators.judge.base import Judge, JudgeObserver
from evaluators.judge.budget import Budget, Budgets, Limits, SessionTokens
from evaluators.judge.pricing import Prices


def tenant_budgets(
    usd_per_day: dict[str, float], clock: Callable[[], float] = time.time
) -> dict[str, Budget]:
    """A judge budget for each tenant with a ``judge_usd_per_day`` of its own."""
    return {
        tenant: Budget(f"tenant {tenant or '(default)'}", Limits(usd_per_day=usd), clock)
        for tenant, usd in usd_per_day.items()
    }


def _limits(budget: BudgetConfig) -> Limits:
    return Limits(budget.tokens_per_hour, budget.tokens_per_day, budget.usd_per_hour, budget.usd_per_day)


def build_judge(config: Evaluation, observer: JudgeObserver) -> Judge | None:
    if not config.judge.configured:
        return None
    from collector.evaluate.anthropic import AnthropicJudge

    j = config.judge
    return AnthropicJudge(
        api_key=j.api_key,
        base_url=j.base_url,
        timeout=j.timeout,
        retry=RetryPolicy(j.max_retries, j.backoff, j.max_backoff, j.max_retry_after),
        observer=observer,
        provider=j.provider,
        aws_region=j.aws_region,
        project_id=j.project_id,
        region=j.region,
    )


def judge_env(
    config: Evaluation,
    observer: JudgeObserver,
    judge: Judge | None = None,
    clock: Callable[[], float] = time.time,
    tenant_budgets: dict[str, Budget] | None = None,
) -> JudgeEnv | None:
    """What ``execute`` needs to call the judge (None: no judge is configured): the judge
    itself, prices, and the budgets, shared by every call in this process.  A tenant with a
    budget of its own (``tenant_budgets``) is held to it first, then to the others."""
    judge = judge if judge is not None else build_judge(config, observer)
    if judge is None:
        return None
    judge_budget = Budget("judge", _limits(config.judge.budget), clock)
    per_evaluation = {
        name: Budgets([judge_budget, Budget(name, _limits(e.budget), clock)])
        for name, e in config.evaluators.judged()
    }
    fallback = Budgets([judge_budget])
    own = tenant_budgets or {}

    def budgets(name: str, tenant: str) -> Budgets:
        shared = per_evaluation.get(name, fallback)
        return shared if tenant not in own else Budgets([own[tenant], *shared.budgets])

    def prices(model: str) -> Prices | None:
        price = config.judge.price(model)
        return (
            None
            if price is None
            else Prices.of(price.input, price.output, price.cache_read, price.cache_write)
        )

    return JudgeEnv(
        judge=judge,
        prices=prices,
        budgets=budgets,
        observer=observer,
        session_tokens=SessionTokens(config.judge.max_session_input_tokens),
    )
