"""Fakes beside the chain's interfaces, for tests of a stage or of a whole chain.

- ``RecordingConsumer``: a ``Consumer`` that keeps every item it is given.
- ``MemorySpool``: the store with nothing kept beyond the process (``storage.path: ":memory:"``).
- ``FakeJudge``: a judge answering from a script, in process (no HTTP).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from collector.state.store import MemorySpool
from evaluators.judge.testing import FakeJudge

T = TypeVar("T")

__all__ = ["FakeJudge", "MemorySpool", "RecordingConsumer"]


class RecordingConsumer(Generic[T]):
    """Keeps every item, in order; ``shutdowns`` counts the calls to ``shutdown``."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.shutdowns = 0

    async def consume(self, item: T) -> None:
        self.items.append(item)

    async def shutdown(self, timeout: float) -> None:
        self.shutdowns += 1
