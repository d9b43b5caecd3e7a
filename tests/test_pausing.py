"""Work in slices gives way between them to the steps others have ready (a chain of steps runs
through in consecutive turns, not a step a slice), for at most ``GIVE_WAY_SECONDS`` a pause,
and paused work does not give way to other paused work."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from collector import pausing
from collector.pausing import GIVE_WAY_SECONDS, pause
from collector.sessions.stage import stepped


def steps(log: list[str], name: str, count: int) -> Iterator[None]:
    """``count`` slices of work, logged, with a pause between each two."""
    for n in range(count):
        log.append(f"{name}{n}")
        if n < count - 1:
            yield


async def chain(log: list[str], count: int) -> None:
    """A chain of ``count`` steps, each scheduled by the one before (as a request's way
    through the loop: a completion, the tasks it wakes, the handler)."""
    for n in range(count):
        log.append(f"step{n}")
        await asyncio.sleep(0)


async def sliced(log: list[str], name: str, count: int) -> None:
    for _ in steps(log, name, count):
        await pause()


def test_a_chain_of_steps_runs_through_between_two_slices() -> None:
    """``stepped`` (a request checked in slices): the chain started during the first slice
    has run all its steps before the second slice (with a turn a pause: one step a slice)."""
    log: list[str] = []

    def slices() -> Iterator[None]:
        log.append("slice0")
        asyncio.get_running_loop().create_task(chain(log, 5))
        yield
        log.append("slice1")
        yield
        log.append("slice2")

    async def main() -> None:
        await stepped(slices())  # type: ignore[arg-type]

    asyncio.run(main())
    assert log == ["slice0", "step0", "step1", "step2", "step3", "step4", "slice1", "slice2"]


def test_paused_work_does_not_give_way_to_paused_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sliced tasks alone take turns a slice each, and each pause is one turn: the time
    to give way is read once a pause (the bound is never looked at)."""
    reads: list[int] = []
    monkeypatch.setattr(pausing, "_clock", lambda: reads.append(1) or 0.0)  # time stands still
    log: list[str] = []

    async def main() -> None:
        await asyncio.gather(sliced(log, "a", 4), sliced(log, "b", 4))

    asyncio.run(main())
    assert log == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"]
    # Three pauses each, and b's last gave way once more: to the callback of a's task ending.
    assert len(reads) == 7


def test_giving_way_ends_after_give_way_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind others always ready, a pause lasts until ``GIVE_WAY_SECONDS`` have passed, then
    the next slice runs; each read of the clock here takes a tenth of it."""
    now = [0.0]

    def clock() -> float:
        now[0] += GIVE_WAY_SECONDS / 10
        return now[0]

    monkeypatch.setattr(pausing, "_clock", clock)
    log: list[str] = []

    async def main() -> None:
        busy = asyncio.get_running_loop().create_task(chain(log, 10_000))
        await sliced(log, "x", 3)
        busy.cancel()

    asyncio.run(main())
    slices = [n for n, entry in enumerate(log) if entry.startswith("x")]
    between = [b - a - 1 for a, b in itertools.pairwise(slices)]
    # The turn given, then turns while the clock read under the bound: about ten.
    assert len(between) == 2 and all(9 <= turns <= 11 for turns in between), between
