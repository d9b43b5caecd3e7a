"""Appended requests made durable before they are acknowledged, one sync for many.

A request's frame is written on the event loop (``collector.state.appended``); the write is in
the kernel's page cache once it returns, which survives ``kill -9`` but not a power cut.  Its
acknowledgement waits, in ``wait``, for a sync (``Segments.sync``: ``fdatasync``) that began
after the write.  The appends of one event-loop turn share one sync, run off the loop (in the
default executor), one at a time: the appends made while a sync runs wait for the next, which
starts as soon as that one ends.  Under load a sync covers many requests; alone, a request
waits for one (~0.3 ms on an SSD).

While a sync runs, serve's switch interval is short (``collector.switching``): the thread that
ran it wins the GIL back from a busy event loop soon, whatever the interval is otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from collector.switching import SWITCHING


class GroupSync:
    """Runs ``sync`` (blocking: makes every byte written before it was called durable) for the
    callers of ``wait``, one run for all that wait at once."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._next: asyncio.Future[None] | None = None  # the group the next run answers
        self._task: asyncio.Task[None] | None = None  # runs groups while there are any
        self.runs = 0  # syncs run so far

    async def wait(self) -> None:
        """Return once a sync that began after this call has ended; raise what it raised
        (``OSError``: the disk could not make the bytes durable)."""
        loop = asyncio.get_running_loop()
        group = self._next
        if group is None:
            group = self._next = loop.create_future()
        if self._task is None:
            self._task = loop.create_task(self._run(), name="skillgauge-sync")
        await asyncio.shield(group)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._next is not None:
                group, self._next = self._next, None
                try:
                    await loop.run_in_executor(None, self._handed_back)
                except Exception as err:
                    group.set_exception(err)
                    group.exception()  # its waiters see it; none left is not an error
                else:
                    group.set_result(None)
                self.runs += 1
        finally:
            self._task = None

    def _handed_back(self) -> None:
        """``sync``, the switch interval short until it returns."""
        SWITCHING.synced(self._sync)
