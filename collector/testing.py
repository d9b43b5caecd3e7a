"""Fakes beside the chain's interfaces, for tests of a stage or of a whole chain.

- ``RecordingConsumer``: a ``Consumer`` that keeps every item it is given.
- ``memory_store``: the store with nothing kept beyond the process (``storage.path: ":memory:"``).
- ``FakeJudge``: a judge answering from a script, in process (no HTTP).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from collector.state.facade import Store
from evaluators.judge.testing import FakeJudge

T = TypeVar("T")

__all__ = ["FakeJudge", "RecordingConsumer", "memory_store"]


def memory_store(outbox_capacity: int = 100_000, revisions_capacity: int = 10_000) -> Store:
    """The store on an in-memory database (``storage.path: ":memory:"``): the same code as
    the durable one, nothing kept beyond the process."""
    return Store.in_memory(outbox_capacity, revisions_capacity)


class RecordingConsumer(Generic[T]):
    """Keeps every item, in order; ``shutdowns`` counts the calls to ``shutdown``."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.shutdowns = 0

    async def consume(self, item: T) -> None:
        self.items.append(item)

    async def shutdown(self, timeout: float) -> None:
        self.shutdowns += 1
