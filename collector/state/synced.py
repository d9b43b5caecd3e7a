"""Appended requests made durable before they are acknowledged, one sync for many.

A request's frame is written on the event loop (``collector.state.appended``); the write is in
the kernel's page cache once it returns, which survives ``kill -9`` but not a power cut.  Its
acknowledgement waits, in ``wait``, for a sync (``Segments.sync``: ``fdatasync``) that began
after the write.  Syncs run off the loop (in the default executor), one at a time: an append
while none runs starts one at once; the appends made while a sync runs wait for the next, which
starts as soon as that one ends, one sync for them all.  Under load a sync covers many
requests; alone, a request waits for one (~0.3 ms on an SSD).

An acknowledgement waits for as few event-loop turns as can be, because each turn waits behind
whatever else the loop has ready (an assembly slice, a batch of closes, a recorded batch): the
sync starts within the append's own turn, and the thread that ran it hands its outcome to the
loop itself (``call_soon_threadsafe``), where one callback answers every waiter of the run and
starts the next run, so a waiter resumes in the turn after the one that answered it.

While a sync runs, serve's switch interval is short (``collector.switching``): the thread that
ran it wins the GIL back from a busy event loop soon, whatever the interval is otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from collector.switching import SWITCHING


class GroupSync:
    """Runs ``sync`` (blocking: makes every byte written before it was called durable) for the
    callers of ``wait``, one run for all that wait at once."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._next: list[asyncio.Future[None]] = []  # the waiters the next run answers
        self._busy = False  # a run is under way
        self.runs = 0  # syncs run so far

    async def wait(self) -> None:
        """Return once a sync that began after this call has ended; raise what it raised
        (``OSError``: the disk could not make the bytes durable)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._next.append(waiter)
        if not self._busy:  # none under way: this one starts at once
            self._busy = True
            self._start(loop)
        await waiter  # cancelled alone: the group's run goes on for the others

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        group, self._next = self._next, []
        if not group:
            self._busy = False
            return
        try:
            loop.run_in_executor(None, self._run, loop, group)
        except RuntimeError as err:  # the executor is shut down: nothing can be synced any more
            self._answer(loop, group, OSError(f"the request log cannot be synced: {err}"))

    def _run(self, loop: asyncio.AbstractEventLoop, group: list[asyncio.Future[None]]) -> None:
        """Off the loop: the sync, the switch interval short until it returns; then its outcome
        handed to the loop."""
        error: BaseException | None = None
        try:
            SWITCHING.synced(self._sync)
        except Exception as err:
            error = err
        with contextlib.suppress(RuntimeError):  # the loop closed: no one is left to answer
            loop.call_soon_threadsafe(self._answer, loop, group, error)

    def _answer(
        self, loop: asyncio.AbstractEventLoop, group: list[asyncio.Future[None]], error: BaseException | None
    ) -> None:
        """On the loop: every waiter of the run answered, and the next run started if any wait."""
        self.runs += 1
        for waiter in group:
            if waiter.done():  # cancelled
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
        self._start(loop)
