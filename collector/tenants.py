"""Tenants' own limits, from the config to the stages that hold them, and their figures on
/metrics.  The tenants are the ones the config's tokens name, so the ``tenant`` label is
bounded; the default tenant is ``tenant=""``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.receiver.config import TenantLimits
from collector.telemetry import RateLimitedLog
from evaluators.judge.budget import Budget

log = logging.getLogger("skillgauge")


def max_open(limits: dict[str, TenantLimits]) -> dict[str, int]:
    """Each tenant's own ``max_open_sessions``, where it has one."""
    return {t: lim.max_open_sessions for t, lim in limits.items() if lim.max_open_sessions is not None}


def usd_per_day(limits: dict[str, TenantLimits]) -> dict[str, float]:
    """Each tenant's own ``judge_usd_per_day``, where it has one."""
    return {t: lim.judge_usd_per_day for t, lim in limits.items() if lim.judge_usd_per_day is not None}


class TenantFigures:
    """Per tenant, read at each scrape: ``skillgauge_tenant_sessions_open``, its
    ``skillgauge_tenant_max_open_sessions``, ``skillgauge_tenant_judge_usd_today`` against
    ``skillgauge_tenant_judge_usd_per_day``, and ``skillgauge_tenant_limited_total{limit}``:
    requests refused at its ``max_open_sessions`` and judge calls refused at its
    ``judge_usd_per_day`` (each such evaluation is ``skipped / budget_exhausted``)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        limits: dict[str, TenantLimits],
        open_by_tenant: Callable[[], dict[str, int]],
        budgets: dict[str, Budget],
    ) -> None:
        self._limits = limits
        self._open = open_by_tenant
        self._budgets = budgets
        self._refused_open: dict[str, int] = dict.fromkeys(limits, 0)
        self._warn = {tenant: RateLimitedLog(log, logging.WARNING, 30.0) for tenant in limits}
        registry.register(self)

    def refused_open(self, tenant: str, why: Exception) -> None:
        """Count a request refused at ``tenant``'s own ``max_open_sessions``; logged at WARN
        at most once per 30 s for each tenant."""
        self._refused_open[tenant] = self._refused_open.get(tenant, 0) + 1
        if tenant in self._warn:
            self._warn[tenant]("requests refused with backpressure: %s", why)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        label = ["tenant"]
        sessions = GaugeMetricFamily(
            "skillgauge_tenant_sessions_open", "Sessions open, by tenant.", labels=label
        )
        most = GaugeMetricFamily(
            "skillgauge_tenant_max_open_sessions", "A tenant's own max_open_sessions.", labels=label
        )
        spent = GaugeMetricFamily(
            "skillgauge_tenant_judge_usd_today",
            "Judge spend this UTC day (with calls in flight reserved), by tenant with a budget.",
            labels=label,
        )
        budget = GaugeMetricFamily(
            "skillgauge_tenant_judge_usd_per_day", "A tenant's own judge_usd_per_day.", labels=label
        )
        limited = CounterMetricFamily(
            "skillgauge_tenant_limited",
            "Refused at a tenant's own limit: requests (max_open_sessions), judge calls (judge_usd_per_day).",
            labels=["tenant", "limit"],
        )
        open_now = self._open()
        for tenant, limits in sorted(self._limits.items()):
            sessions.add_metric([tenant], open_now.get(tenant, 0))
            if limits.max_open_sessions is not None:
                most.add_metric([tenant], limits.max_open_sessions)
                limited.add_metric([tenant, "max_open_sessions"], self._refused_open.get(tenant, 0))
            if tenant in self._budgets and limits.judge_usd_per_day is not None:
                spent.add_metric([tenant], self._budgets[tenant].used()["usd_day"])
                budget.add_metric([tenant], limits.judge_usd_per_day)
                limited.add_metric([tenant, "judge_usd_per_day"], self._budgets[tenant].refused)
        yield from (sessions, most, spent, budget, limited)
