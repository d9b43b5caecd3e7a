"""The collection policy serve and replay run under: young collections visit what was made
since the last one and free the cycles among it that are garbage already, what survives is
frozen (no young collection visits it again), a full collection runs on the loop once enough
new containers were made or enough time passed, and cyclic garbage frozen while alive stays
bounded by it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Server, export_grpc, metric_value, recorded_trace_requests

from collector.gcpolicy import Collecting, collected


class _Cycle:
    """A container that refers to itself: garbage only a collection frees; ``alive`` counts
    the ones not yet freed."""

    alive = 0

    def __init__(self) -> None:
        self.me = self
        self.payload = [0] * 8
        _Cycle.alive += 1

    def __del__(self) -> None:
        _Cycle.alive -= 1


@pytest.fixture
def cycles() -> Iterator[None]:
    gc.collect()
    _Cycle.alive = 0
    yield
    gc.collect()


def _in_generations(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())  # every generation, not what is frozen


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_young_collections_visit_the_young_once_and_free_its_cycles(cycles: None) -> None:
    clock = _Clock()
    policy = Collecting(young=100, full_after=1_000_000, full_every=60.0, clock=clock)
    kept = [[] for _ in range(10)]
    policy.start(None)
    try:
        assert gc.get_threshold()[0] == 100
        assert not _in_generations(kept)  # start froze what was made before it
        made = [{} for _ in range(10)]
        _Cycle()  # garbage at once
        held = _Cycle()  # alive at the young collection: frozen with what survives
        assert _in_generations(made)
        assert gc.collect(0) > 0  # the young generation visited: the dropped cycle found
        assert _Cycle.alive == 1  # freed young, without a full collection
        assert not _in_generations(made) and not _in_generations(held)  # survivors frozen
        assert gc.collect(0) == 0  # what survived is not visited again
        del held
        assert gc.collect(0) == 0 and _Cycle.alive == 1  # frozen while alive: it waits for the full one
        assert not policy.due
        clock.now = 60.0
        gc.collect(0)  # a young collection once full_every has passed: the full one is due
        assert policy.due
        policy.collect_if_due()
        assert _Cycle.alive == 0 and not policy.due and policy.fulls == 1
        assert not _in_generations(made)  # what the full collection left is frozen
        clock.now = 119.0
        gc.collect(0)
        assert not policy.due  # counted from the last full collection
    finally:
        policy.stop()
    assert _in_generations(made) and _in_generations(kept)  # stopping unfreezes


def test_the_time_bound_waits_for_a_young_collection(cycles: None) -> None:
    """A replica that makes nothing new collects nothing: the time bound is read when a young
    collection runs (what is garbage then was made since)."""
    clock = _Clock()
    woken: list[bool] = []
    policy = Collecting(young=100, full_after=1_000_000, full_every=5.0, clock=clock)
    policy.start(lambda: woken.append(True))
    try:
        clock.now = 100.0
        assert not policy.due and not woken
        held = [_Cycle() for _ in range(300)]  # young collections while they are made
        assert policy.due and woken == [True]
        del held
        policy.collect_if_due()
        assert _Cycle.alive == 0 and policy.fulls == 1
    finally:
        policy.stop()


def test_the_policy_needs_sane_bounds() -> None:
    for young, full_after, full_every in ((0, 10, 1.0), (10, 5, 1.0), (10, 100, 0.0)):
        with pytest.raises(ValueError):
            Collecting(young=young, full_after=full_after, full_every=full_every)


def test_stopping_puts_the_thresholds_back() -> None:
    before = gc.get_threshold()
    policy = Collecting(young=123, full_after=1_000)
    policy.start(None)
    policy.start(None)  # once only
    policy.stop()
    assert gc.get_threshold() == before
    policy.stop()  # safe twice
    assert gc.get_threshold() == before


def _batches(count: int) -> Iterator[list[_Cycle]]:
    """Batches of 100 cycles, each held until the next is made (so young collections find it
    alive and it is frozen) and garbage after: as a session's evidence is while it is open."""
    held: list[_Cycle] = []
    for _ in range(count):
        held = [_Cycle() for _ in range(100)]
        yield held


def test_cyclic_garbage_is_bounded_by_the_full_collection(cycles: None) -> None:
    woken: list[bool] = []
    policy = Collecting(young=200, full_after=2_000)
    policy.start(lambda: woken.append(True))
    most = 0
    try:
        for _ in _batches(200):
            most = max(most, _Cycle.alive)
            policy.collect_if_due()  # as the loop does when woken
    finally:
        policy.stop()
    # 20,000 cycles made, each one or more containers: a full collection comes after 2,000 new
    # containers, so at most 2,000 frozen cycles and the batch held wait for it.
    assert policy.fulls >= 5 and len(woken) == policy.fulls
    assert most <= 2_000 + 100


def test_without_the_full_collection_frozen_garbage_stays(cycles: None) -> None:
    policy = Collecting(young=200, full_after=2_000)
    policy.start(None)
    try:
        for _ in _batches(50):
            pass
        assert policy.due
        assert _Cycle.alive > 4_000  # frozen while held, garbage since: only a full collection frees it
        policy.collect_if_due()
        assert _Cycle.alive <= 100 and not policy.due and policy.fulls == 1
    finally:
        policy.stop()


def test_replay_collects_on_its_loop(cycles: None) -> None:
    policy = Collecting(young=200, full_after=2_000)

    async def work() -> int:
        most = 0
        for _ in _batches(200):
            most = max(most, _Cycle.alive)
            await asyncio.sleep(0)  # a loop turn: the full collection runs when due
        return most

    most = asyncio.run(collected(work(), policy))
    assert policy.fulls >= 5 and most <= 2_000 + 100
    assert policy._after not in gc.callbacks


def test_serve_collects_under_the_policy(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        young = 0.0
        for n, (_, body) in enumerate(recorded_trace_requests()):
            export_grpc(server, body)  # acknowledged: the replica has taken it in
            if n % 50 == 49:
                text = server.metrics()
                young = metric_value(text, "skillgauge_gc_collections_total", generation="0")
                if young:
                    break
    finally:
        server.stop()
    assert young > 0  # the recordings make more than 10,000 new containers
    assert metric_value(text, "skillgauge_gc_collections_total", generation="1") == 0  # survivors frozen
