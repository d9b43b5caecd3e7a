"""The periodic info line: what was evaluated since the last one, from the /metrics counters.

Nothing is logged per evaluated session at info (at volume that is thousands of lines a
second; each session's detail is on the status API).  Instead, every
``status.summary_interval`` one line sums up the sessions closed and evaluated, evaluation
results by status, judge calls by outcome and their spend, and skill loads by status, and
only when something happened.  The figures are differences of the same counters /metrics
exposes, so the line and a dashboard always agree.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry

# counter (its _total sample) -> the label it is broken down by ("" = summed)
_TRACKED = {
    "skillgauge_sessions_closed_total": "",
    "skillgauge_sessions_evaluated_total": "",
    "skillgauge_evaluations_total": "status",
    "skillgauge_judge_requests_total": "outcome",
    "skillgauge_judge_cost_usd_total": "",
    "skillgauge_skill_loads_total": "status",
}

Totals = dict[str, dict[str, float]]


class Summary:
    """Differences of the tracked counters between two calls of ``line``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._last = self._totals()

    def _totals(self) -> Totals:
        totals: Totals = {name: defaultdict(float) for name in _TRACKED}
        for family in self._registry.collect():
            for sample in family.samples:
                by = _TRACKED.get(sample.name)
                if by is not None:
                    totals[sample.name][sample.labels.get(by, "") if by else ""] += sample.value
        return totals

    def line(self) -> str | None:
        """What happened since the last call (or since construction), or None if nothing did."""
        now = self._totals()
        delta = {
            name: {
                k: v - self._last[name].get(k, 0.0)
                for k, v in values.items()
                if v != self._last[name].get(k, 0.0)
            }
            for name, values in now.items()
        }
        self._last = now
        if not any(delta.values()):
            return None
        closed = _sum(delta["skillgauge_sessions_closed_total"])
        evaluated = _sum(delta["skillgauge_sessions_evaluated_total"])
        calls = delta["skillgauge_judge_requests_total"]
        spend = _sum(delta["skillgauge_judge_cost_usd_total"])
        return (
            f"sessions: {closed:g} closed, {evaluated:g} evaluated; "
            f"evaluations: {_by(delta['skillgauge_evaluations_total'])}; "
            f"judge: {_sum(calls):g} calls{f' ({_by(calls)})' if calls else ''}, {spend:.4f} USD; "
            f"skill loads: {_by(delta['skillgauge_skill_loads_total'])}"
        )


def _sum(values: dict[str, float]) -> float:
    return sum(values.values())


def _by(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(values.items())) or "none"


async def log_periodically(
    summary: Summary,
    tick: Callable[[], Awaitable[object]],
    log: logging.Logger,
) -> None:
    """After each ``tick`` (e.g. ``asyncio.sleep(60)``), log ``summary.line()`` at info if it
    has anything to say.  Runs until cancelled."""
    while True:
        await tick()
        line = summary.line()
        if line is not None:
            log.info("since the last summary: %s", line)


def every(seconds: float) -> Callable[[], Awaitable[None]]:
    """A tick that comes ``seconds`` after the previous one."""
    return lambda: asyncio.sleep(seconds)
