"""When Python's garbage collector runs, in ``serve`` and ``replay`` alike: a policy for a
long-running service that outlives what it holds and makes almost no reference cycles.

Reference counting frees what the chain makes; the collector is there for reference cycles,
and the chain's own paths make none (a refused request neither: ``collector.receiver``
answers from frames that hold no error; what is left is a few small objects a gRPC call and
an HTTP connection, from the libraries).  Python's own schedule visits every new container
in a young collection and every survivor again in the older generations' collections, and a
service's open sessions, the closed ones kept for reopening and the accounts waiting to be
recorded all survive them.  ``Collecting`` visits each container once, while it is young:

- a young collection every ``young`` new containers (Python's first threshold; the older
  generations' are never reached) visits the containers made since the last one that are
  still alive, and frees the cycles among them that are garbage already (a finished gRPC
  call's); what survives is then frozen (``gc.freeze``: the lists moved aside at once,
  nothing visited), so no later young collection visits it again.  A frozen object whose
  last reference goes is freed at once, as before;
- a full collection is due after ``full_after`` new containers (``full_after // young``
  young collections) or ``full_every`` seconds, whichever comes first, once a young
  collection ran: ``wake`` is called (serve and replay: the event loop's
  ``call_soon_threadsafe``) to run ``collect_if_due`` outside the collection that found it
  due, which unfreezes everything, collects it all and freezes what is left.

So a cycle waits for the next full collection only when it was still alive at its young
collection (a connection open then, a call in flight): what is kept is bounded by
``full_after`` containers (and what they hold) and by what ``full_every`` seconds make.

Collections do not nest and the callback runs under the GIL in whichever thread collected;
``collect_if_due`` runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# A young collection every 2,000 new containers (~1 ms of a saturated replica's loop, ~2.5 us
# a span); a full one after 200,000,000 (well over an hour saturated) or ten minutes, whichever
# comes first.  A full collection visits every open session, those kept for reopening and the
# accounts waiting to be recorded: 300k objects and 200-450 ms of the loop at saturation, in
# which each acknowledgement in flight waits.  Young collections free nearly all cyclic garbage
# (a few small objects a gRPC call and an HTTP connection, from the libraries), so the full
# one comes at the time bound.  Measured in tests/perf/README.md ("Garbage collection: what a
# collection leaves is frozen", "Young collections visit the young; the full collection every
# ten minutes").
YOUNG = 2_000
FULL_AFTER = 200_000_000
FULL_EVERY = 600.0
_NEVER = 2**30  # an older generation's threshold: never reached


class Collecting:
    """The policy above; ``start`` installs it for the process, ``stop`` puts Python's
    thresholds back and unfreezes what it froze.  ``fulls`` counts the full collections run;
    ``clock`` (seconds, monotonic) is the seam for ``full_every``."""

    def __init__(
        self,
        young: int = YOUNG,
        full_after: int = FULL_AFTER,
        full_every: float = FULL_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if young < 1 or full_after < young or full_every <= 0:
            raise ValueError(
                f"young ({young}) must be >= 1, full_after ({full_after}) >= young and full_every"
                f" ({full_every}) > 0"
            )
        self.young = young
        self.collections_per_full = full_after // young
        self.full_every = full_every
        self.fulls = 0
        self._clock = clock
        self._since_full = 0  # collections since the last full one
        self._last_full = clock()
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
        self._last_full = self._clock()

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
        if info["generation"] != 2:
            if phase == "start":
                return  # it visits the young generation: what was made since the last one
            gc.freeze()  # what survived it: no young collection visits it again
            self._since_full += 1
            if not self._due and (
                self._since_full >= self.collections_per_full
                or self._clock() - self._last_full >= self.full_every
            ):
                self._due = True
                if self._wake is not None:
                    self._wake()
            return
        if phase == "stop":
            gc.freeze()  # what the full collection left
            self._since_full = 0
            self._last_full = self._clock()
            self._due = False


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
