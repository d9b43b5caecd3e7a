"""Appended requests made durable before they are acknowledged, one sync for many.

A request's frame is written on the event loop (``collector.state.appended``); the write is in
the kernel's page cache once it returns, which survives ``kill -9`` but not a power cut.  Its
acknowledgement waits, in ``wait``, for a sync (``Segments.sync``: ``fdatasync``) that began
after the write.  The appends of one event-loop turn share one sync, run off the loop (in the
default executor), one at a time: the appends made while a sync runs wait for the next, which
starts as soon as that one ends.  Under load a sync covers many requests; alone, a request
waits for one (~0.3 ms on an SSD).

While a sync runs, the switch interval (``sys.setswitchinterval``) is at most ``HANDOFF``: the
thread that ran it wins the GIL back from a busy event loop that soon, so an acknowledgement
waits on it for no longer than that, whatever the interval is the rest of the time.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable

# The switch interval while a sync runs: how long its thread may wait to win the GIL back.
HANDOFF = 0.0005


class _Shortened:
    """The switch interval at most ``HANDOFF`` while any sync of the process runs (each
    ``GroupSync`` runs one at a time; a process may hold several), as it was once none does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._outside = 0.0  # the interval before the first of the syncs running began

    def run(self, sync: Callable[[], None]) -> None:
        with self._lock:
            if not self._running:
                self._outside = sys.getswitchinterval()
                sys.setswitchinterval(min(self._outside, HANDOFF))
            self._running += 1
        try:
            sync()
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    sys.setswitchinterval(self._outside)


_SHORTENED = _Shortened()


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
        """``sync``, the switch interval at most ``HANDOFF`` until it returns."""
        _SHORTENED.run(self._sync)
