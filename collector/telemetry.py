"""What every component's metrics share: bounded skill labels and a cache of labelled series.

Labels never carry a session id, a score or free text.  Skill names are capped to the
operator's skills (registry and expectations, reserved first) and the skills seen in
catalogs; anything else is ``other``.  Both the number of names and the length of each are
bounded, so a misbehaving agent cannot explode the series count or the size of /metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from evaluators.bytecache import CACHES
from evaluators.evidence import fold_skill_name

MAX_SKILL_LABELS = 200
MAX_LABEL_LENGTH = 64  # the Agent Skills spec's maximum skill name length
OTHER = "other"


class SkillLabels:
    """Maps a skill name to a bounded label value.

    ``reserve`` takes the operator's names (registry, expectations) first; names observed
    in traffic (``learn``) take only the slots left, so a large catalog seen early can never
    push an operator's skill to ``other``.  A name longer than ``MAX_LABEL_LENGTH`` is never
    a label."""

    def __init__(self, limit: int = MAX_SKILL_LABELS) -> None:
        self._reserved: set[str] = set()
        self._observed: set[str] = set()
        self._limit = limit

    def reserve(self, names: list[str]) -> None:
        for name in names:
            folded = fold_skill_name(name)
            if len(folded) > MAX_LABEL_LENGTH or folded in self._reserved:
                continue
            if len(self._reserved) >= self._limit:
                return
            self._reserved.add(folded)
            self._observed.discard(folded)
        while len(self._reserved) + len(self._observed) > self._limit:
            self._observed.pop()  # a reserved name takes an observed one's slot

    def learn(self, names: list[str]) -> None:
        for name in names:
            if len(self._reserved) + len(self._observed) >= self._limit:
                return
            folded = fold_skill_name(name)
            if len(folded) <= MAX_LABEL_LENGTH and folded not in self._reserved:
                self._observed.add(folded)

    def learn_folded(self, folded_names: Iterable[str]) -> None:
        """``learn``, for names already folded (``fold_skill_name``): a catalog's keys."""
        for folded in folded_names:
            if len(self._reserved) + len(self._observed) >= self._limit:
                return
            if len(folded) <= MAX_LABEL_LENGTH and folded not in self._reserved:
                self._observed.add(folded)

    def __call__(self, name: str | None) -> str:
        folded = fold_skill_name(name or "")
        return folded if folded in self._reserved or folded in self._observed else OTHER


class Series:
    """``metric.labels(*labels)``, remembered: every closed session counts a dozen series,
    and ``labels`` validates and locks on each call.  Label values are bounded by design."""

    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def __call__(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child


class RateLimitedLog:
    """One kind of log line, at most once per ``every`` seconds: the lines in between are
    counted, and the next line written says how many were suppressed."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._level = level
        self._every = every
        self._clock = clock
        self._last: float | None = None
        self.suppressed = 0  # lines not written since the last one

    def __call__(self, message: str, *args: object) -> bool:
        """Write the line unless one was written less than ``every`` seconds ago; True if written."""
        now = self._clock()
        if self._last is not None and now - self._last < self._every:
            self.suppressed += 1
            return False
        if self.suppressed:
            message += " (%d similar lines suppressed in the last %.0fs)"
            args = (*args, self.suppressed, now - self._last if self._last is not None else 0.0)
        self._logger.log(self._level, message, *args)
        self._last = now
        self.suppressed = 0
        return True


class CacheSizes:
    """``skillgauge_cache_bytes{cache}`` and ``skillgauge_cache_max_bytes{cache}``: what each
    byte-sized cache holds now and may hold, read at each scrape: every
    ``evaluators.bytecache.CACHES`` entry, and ``held``, caches kept elsewhere (name -> a
    function giving the bytes held, the most it may hold and the entries pushed out so far).
    ``skillgauge_cache_evictions_total{cache}`` counts the entries pushed out to make room."""

    def __init__(
        self, registry: CollectorRegistry, held: dict[str, Callable[[], tuple[int, int, int]]]
    ) -> None:
        self._held = held
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []  # read at each scrape: the module-level caches may be made after this

    def collect(self) -> Iterator[Metric]:
        held = GaugeMetricFamily(
            "skillgauge_cache_bytes", "Estimated bytes each cache holds.", labels=["cache"]
        )
        limit = GaugeMetricFamily(
            "skillgauge_cache_max_bytes", "The most each cache may hold, in bytes.", labels=["cache"]
        )
        evicted = CounterMetricFamily(
            "skillgauge_cache_evictions", "Entries pushed out of each cache to make room.", labels=["cache"]
        )
        for name, cache in sorted(CACHES.items()):
            held.add_metric([name], cache.bytes)
            limit.add_metric([name], cache.max_bytes)
            evicted.add_metric([name], cache.evictions)
        for name, read in sorted(self._held.items()):
            now, most, pushed_out = read()
            held.add_metric([name], now)
            limit.add_metric([name], most)
            evicted.add_metric([name], pushed_out)
        yield from (held, limit, evicted)
