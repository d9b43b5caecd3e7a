"""When Python's garbage collector runs, in ``serve`` and ``replay`` alike: a policy for a
long-running service that outlives what it holds.

Reference counting frees most of what the chain makes; the collector is there for reference
cycles.  Python's own schedule visits every container that outlives a young collection again
in each middle collection (every third young one), and a service's open sessions, the closed
ones kept for reopening and the accounts waiting to be recorded all do.  ``Collecting`` keeps
Python's young collections and freezes what each collection leaves:

- a young collection every ``young`` new containers (Python's first threshold; the older
  generations' are never reached): it visits what is new since the last collection and frees
  the cycles already garbage (a refused request leaves some: young collections must run);
- after every collection, what survived is frozen (``gc.freeze``: the lists moved aside at
  once, nothing visited), so no collection but a full one visits it again.  A frozen object
  whose last reference goes is freed at once, as before;
- after ``full_after`` new containers (``full_after // young`` collections), a full collection
  is due: ``wake`` is called (serve and replay: the event loop's ``call_soon_threadsafe``) to
  run ``collect_if_due`` outside the collection that found it due, which unfreezes everything,
  collects it all and freezes what is left.  A cycle that became garbage after its young
  collection waits at most that long: what is kept is bounded by ``full_after`` containers
  (and what they hold).

Collections do not nest and the callback runs under the GIL in whichever thread collected;
``collect_if_due`` runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Young collections every 2,000 new containers (visited while still in the CPU's caches); a
# full one after 2,000,000 (about a minute of a saturated replica).  Measured in
# tests/perf/README.md ("Garbage collection: what a collection leaves is frozen").
YOUNG = 2_000
FULL_AFTER = 2_000_000
_NEVER = 2**30  # an older generation's threshold: never reached


class Collecting:
    """The policy above; ``start`` installs it for the process, ``stop`` puts Python's
    thresholds back and unfreezes what it froze.  ``fulls`` counts the full collections run."""

    def __init__(self, young: int = YOUNG, full_after: int = FULL_AFTER) -> None:
        if young < 1 or full_after < young:
            raise ValueError(f"young ({young}) must be >= 1 and full_after ({full_after}) >= young")
        self.young = young
        self.collections_per_full = full_after // young
        self.fulls = 0
        self._since_full = 0  # collections since the last full one
        self._due = False
        self._wake: Callable[[], None] | None = None
        self._thresholds = gc.get_threshold()

    def start(self, wake: Callable[[], None] | None) -> None:
        """Install the policy.  ``wake`` is called (from any thread) when a full collection is
        due and must make ``collect_if_due`` run soon; without one, the owner calls it."""
        self._wake = wake
        if self._after not in gc.callbacks:
            self._thresholds = gc.get_threshold()
            gc.callbacks.append(self._after)
        gc.set_threshold(self.young, _NEVER, _NEVER)
        gc.freeze()

    def stop(self) -> None:
        if self._after in gc.callbacks:
            gc.callbacks.remove(self._after)
            gc.set_threshold(*self._thresholds)
        self._wake = None
        gc.unfreeze()

    def start_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """``start``, with full collections run on ``loop`` (none once it is closed)."""

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nothing runs on it any more
                loop.call_soon_threadsafe(self.collect_if_due)

        self.start(wake)

    @property
    def due(self) -> bool:
        return self._due

    def collect_if_due(self) -> None:
        """The full collection, if one is due: everything unfrozen, collected, frozen again."""
        if not self._due:
            return
        gc.unfreeze()
        gc.collect()  # ``_after`` freezes what is left and clears ``due``
        self.fulls += 1

    def _after(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop":
            return
        gc.freeze()  # what the collection left
        if info["generation"] == 2:
            self._since_full = 0
            self._due = False
            return
        self._since_full += 1
        if self._since_full >= self.collections_per_full and not self._due:
            self._due = True
            if self._wake is not None:
                self._wake()


# The process's (thresholds and gc's callbacks are one for all its threads).
GC_POLICY = Collecting()


async def collected(work: Awaitable[T], policy: Collecting = GC_POLICY) -> T:
    """``work`` awaited under ``policy``, started on the running loop and stopped after (how
    ``replay`` collects, as ``serve`` does)."""
    policy.start_on(asyncio.get_running_loop())
    try:
        return await work
    finally:
        policy.stop()
