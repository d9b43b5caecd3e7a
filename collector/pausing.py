"""How work that runs on the event loop in slices gives way between them (``pause``).

Work that would hold the loop for long (assembling a request, checking one, closing due
sessions, recording a batch, converting a JSON body) runs in slices of ~2 ms with
``await pause()`` between them.  ``asyncio.sleep(0)`` alone gives the loop one turn, in which
everything ready runs once; what that runs schedules its next step for the turn after, behind
the next slice.  An acknowledgement's way through the loop is such a chain of steps (gRPC's:
the completion that brings a call, the server's task, the call's task, the handler; then its
message read, the spool's append, the sync's outcome and its waiter), so with one turn a pause
each step would wait a slice, and a gRPC request four or five slices before its handler starts.

``pause`` gives the loop one turn, then more while anything other than paused work is ready
to run (a step scheduled by the turn before), for at most ``GIVE_WAY_SECONDS`` a pause: such
a chain runs through in consecutive turns, each without a slice.  Paused work still gets at
least one slice in each ``GIVE_WAY_SECONDS`` of others' ready steps.  On a loop that does not
show what it has ready (not asyncio's own), ``pause`` is one turn, as ``asyncio.sleep(0)``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Sized

GIVE_WAY_SECONDS = 0.002  # as long as a slice
_clock: Callable[[], float] = time.perf_counter  # what giving way is timed by (a seam for tests)
# Per loop: the pauses under way, each one callback in the loop's ready queue but the one
# that runs (which is what tells them from the steps of others).
_paused: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[int]] = weakref.WeakKeyDictionary()


async def pause() -> None:
    """Give the event loop a turn, then more turns while others' steps are ready (see the
    module's docstring)."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)  # asyncio's loops: what runs in the next turn
    if not isinstance(ready, Sized):
        await asyncio.sleep(0)
        return
    paused = _paused.get(loop)
    if paused is None:
        paused = _paused[loop] = [0]
    paused[0] += 1
    try:
        await asyncio.sleep(0)
        until = _clock() + GIVE_WAY_SECONDS
        # Ready: the other pauses (all but this one) and whatever else is to run.
        while len(ready) >= paused[0] and _clock() < until:
            await asyncio.sleep(0)
    finally:
        paused[0] -= 1
