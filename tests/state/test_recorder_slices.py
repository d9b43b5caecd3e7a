"""The recorder prepares a batch's sessions a slice of time at a time, the event loop turning in
between (acknowledgements wait behind no long turn), and still commits the batch in one
transaction."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry

from collector.state import recorder as recorder_module
from collector.state.metrics import CoverageMetrics
from collector.state.recorder import RECORD_BATCH, SLICE_SECONDS, Evaluated, Recorder
from collector.testing import memory_store
from evaluators.evidence import Session
from evaluators.result import Coverage

COST = 0.001  # of the slices' clock, for each session handed to the exporters


class Exporters:
    """Takes each account, advancing the slices' clock by ``COST``; notes the loop's turn."""

    def __init__(self, clock: list[float], turns: list[int]) -> None:
        self.clock, self.turns = clock, turns
        self.taken: list[int] = []  # the turn each account was taken in

    async def consume(self, item: Coverage) -> None:
        self.clock[0] += COST
        self.taken.append(self.turns[0])

    async def shutdown(self, timeout: float) -> None:
        pass


async def test_a_batch_is_prepared_a_slice_at_a_time_and_committed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, turns = [0.0], [0]
    monkeypatch.setattr(recorder_module, "_clock", lambda: clock[0])
    store = memory_store()
    exporters = Exporters(clock, turns)
    recorder = Recorder(store, CoverageMetrics(CollectorRegistry()), exporters)
    recorder.keep_closed = True
    commits: list[int] = []
    save_coverage = store.save_coverage

    async def counted(revisions, lines=None):  # type: ignore[no-untyped-def]
        commits.append(len(revisions))
        await save_coverage(revisions, lines)

    monkeypatch.setattr(store, "save_coverage", counted)

    async def count_turns() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_turns())
    for n in range(RECORD_BATCH):
        await recorder.consume(Evaluated(Coverage(Session(f"s{n}")), time.monotonic()))
    await recorder.drain(30)
    counter.cancel()
    per_turn: dict[int, int] = {}
    for turn in exporters.taken:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert sum(per_turn.values()) == RECORD_BATCH
    assert max(per_turn.values()) <= round(SLICE_SECONDS / COST) + 1
    assert commits == [RECORD_BATCH]  # one transaction for the batch
    assert len(recorder.closed) == RECORD_BATCH
    await store.shutdown(5)
