"""The CPU time garbage collections take, by generation, from gc's own callbacks; counted only
while the clock is started, and served at each scrape."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from support import Server, metric_value

from collector.gcclock import GcClock


class _Ticks:
    """A CPU clock that advances a quarter of a second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


@pytest.fixture
def clock() -> Iterator[GcClock]:
    """A clock on ``_Ticks``; only the tests' own collections run meanwhile."""
    made = GcClock(_Ticks())
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield made
    finally:
        made.stop()
        if enabled:
            gc.enable()


def test_each_collection_is_timed_by_its_generation(clock: GcClock) -> None:
    clock.start()
    clock.start()  # once only: a collection is not counted twice
    gc.collect(1)
    assert clock.collections[1] == 1 and clock.seconds[1] == 0.25  # read at its start and stop
    gc.collect(2)
    assert clock.collections == [0, 1, 1] and clock.seconds == [0.0, 0.25, 0.25]


def test_the_garbage_each_collection_finds_is_counted(clock: GcClock) -> None:
    clock.start()
    for _ in range(5):
        cycle: list[object] = []
        cycle.append(cycle)
    del cycle
    gc.collect(0)
    assert clock.collected[0] == 5
    gc.collect(2)
    assert clock.collected == [5, 0, 0]


def test_nothing_is_counted_unless_started_or_once_stopped(clock: GcClock) -> None:
    gc.collect()
    clock.start()
    clock.stop()
    gc.collect()
    assert clock.collections == [0, 0, 0] and clock.seconds == [0.0, 0.0, 0.0]


def test_the_counts_are_served_at_each_scrape(clock: GcClock) -> None:
    registry = CollectorRegistry()
    clock.register(registry)
    clock.start()
    gc.collect(0)
    text = generate_latest(registry).decode()
    assert metric_value(text, "skillgauge_gc_cpu_seconds_total", generation="0") == 0.25
    assert metric_value(text, "skillgauge_gc_collections_total", generation="0") == 1
    assert metric_value(text, "skillgauge_gc_collections_total", generation="2") == 0
    assert "skillgauge_gc_collected_objects_total" in text
    gc.collect(0)
    later = generate_latest(registry).decode()
    assert metric_value(later, "skillgauge_gc_collections_total", generation="0") == 2


def test_serve_counts_its_collections(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        text = server.metrics()
    finally:
        server.stop()
    for generation in "012":  # how many run under serve's policy: tests/test_gcpolicy.py
        assert f'skillgauge_gc_collections_total{{generation="{generation}"}}' in text
        assert f'skillgauge_gc_cpu_seconds_total{{generation="{generation}"}}' in text
