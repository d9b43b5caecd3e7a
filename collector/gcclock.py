"""CPU time the process spends collecting garbage, by generation:
``skillgauge_gc_cpu_seconds_total{generation}``, ``skillgauge_gc_collections_total{generation}``
and ``skillgauge_gc_collected_objects_total{generation}`` (the unreachable objects the
collections found: cyclic garbage, which ``collector.gcpolicy`` counts on being rare).

Python's collector runs on whichever thread allocates when a generation's threshold is
crossed (``collector.gcpolicy``), inside that thread's work: a profile shows it as
part of whatever allocated.  ``GcClock`` times each collection from gc's own start and stop
callbacks, with the CPU clock of the thread that runs it (``time.thread_time``: the time other
threads and processes take meanwhile does not count).  Only a started clock counts (serve
starts ``GC_CLOCK``); ``stop`` takes its callback out again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric

GENERATIONS = 3


class GcClock:
    """Collections, the CPU seconds they took and the objects they found unreachable, by
    generation (``seconds``, ``collections``, ``collected``); ``clock`` is the seam (a
    thread's CPU clock)."""

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        self._clock = clock
        self._began = 0.0  # when the collection under way began (collections do not nest)
        self.seconds = [0.0] * GENERATIONS
        self.collections = [0] * GENERATIONS
        self.collected = [0] * GENERATIONS

    def start(self) -> None:
        if self._observe not in gc.callbacks:
            gc.callbacks.append(self._observe)

    def stop(self) -> None:
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = self._clock()
            return
        generation = info["generation"]
        self.seconds[generation] += self._clock() - self._began
        self.collections[generation] += 1
        self.collected[generation] += info["collected"]

    def register(self, registry: CollectorRegistry) -> None:
        """Serve its counts at each scrape of ``registry``."""
        registry.register(_Metrics(self))


class _Metrics:
    def __init__(self, clock: GcClock) -> None:
        self._clock = clock

    def describe(self) -> list[Metric]:
        return []  # read at each scrape

    def collect(self) -> Iterator[Metric]:
        seconds = CounterMetricFamily(
            "skillgauge_gc_cpu_seconds",
            "CPU seconds spent collecting garbage (Python's gc), by generation.",
            labels=["generation"],
        )
        collections = CounterMetricFamily(
            "skillgauge_gc_collections",
            "Garbage collections run (Python's gc), by generation.",
            labels=["generation"],
        )
        collected = CounterMetricFamily(
            "skillgauge_gc_collected_objects",
            "Objects garbage collections found unreachable (cyclic garbage), by generation.",
            labels=["generation"],
        )
        for generation in range(GENERATIONS):
            seconds.add_metric([str(generation)], self._clock.seconds[generation])
            collections.add_metric([str(generation)], self._clock.collections[generation])
            collected.add_metric([str(generation)], self._clock.collected[generation])
        yield from (seconds, collections, collected)


# The process's (gc's callbacks are one list for all its threads).
GC_CLOCK = GcClock()
