"""Appended requests made durable before they are acknowledged, one sync for many.

A request's frame is written on the event loop (``collector.state.appended``); the write is in
the kernel's page cache once it returns, which survives ``kill -9`` but not a power cut.  Its
acknowledgement waits, in ``wait``, for a sync (``Segments.sync``: ``fdatasync``) that began
after the write.  Syncs run off the loop, on a thread of their own, one at a time: an append
while none runs starts one at once; the appends made while a sync runs wait for the next, which
starts as soon as that one ends, one sync for them all.  Under load a sync covers many
requests; alone, a request waits for one (~0.3 ms on an SSD).

An acknowledgement waits for as few event-loop turns as can be, because each turn waits behind
whatever else the loop has ready (an assembly slice, a batch of closes, a recorded batch): the
sync starts within the append's own turn (its run handed to the sync thread through a queue,
which wakes nothing on the loop), and that thread hands the outcome to the loop itself
(``call_soon_threadsafe``), where one callback answers every waiter of the run and starts the
next run, so a waiter resumes in the turn after the one that answered it.  Whatever the sync
raises, every waiter of its run is answered (an ``OSError`` for what is not an ``Exception``)
and the thread goes on serving runs.

From the hand-off until the sync returned, serve's switch interval is short
(``collector.switching``): the sync thread wins the GIL from a busy event loop soon, to start
the sync and once it returned, whatever the interval is otherwise.

The thread is started with the first run and ends once no run came for ``IDLE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable

from collector.switching import SWITCHING

# How long the sync thread waits for a run before it ends (the next run starts another).
IDLE_SECONDS = 10.0

_Run = tuple[asyncio.AbstractEventLoop, list["asyncio.Future[None]"]]


class GroupSync:
    """Runs ``sync`` (blocking: makes every byte written before it was called durable) for the
    callers of ``wait``, one run for all that wait at once."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._next: list[asyncio.Future[None]] = []  # the waiters the next run answers
        self._busy = False  # a run is under way
        self.runs = 0  # syncs run so far
        self._runs: queue.SimpleQueue[_Run] = queue.SimpleQueue()  # handed to the sync thread
        self._lock = threading.Lock()  # the thread's ending against a run handed to it
        self._thread: threading.Thread | None = None

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
        SWITCHING.handed()
        try:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(target=self._serve, name="skillgauge-sync", daemon=True)
                    thread.start()
                    self._thread = thread
                self._runs.put((loop, group))
        except RuntimeError as err:  # no thread can be started: nothing can be synced
            SWITCHING.returned()
            self._answer(loop, group, OSError(f"the request log cannot be synced: {err}"))

    def _serve(self) -> None:
        """The sync thread: each run handed to it synced, its outcome handed to the loop."""
        while True:
            try:
                loop, group = self._runs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._runs.empty():  # else a run came meanwhile: serve it
                        self._thread = None
                        return
                continue
            self._run(loop, group)

    def _run(self, loop: asyncio.AbstractEventLoop, group: list[asyncio.Future[None]]) -> None:
        """Off the loop: the sync; then its outcome handed to the loop."""
        error: BaseException | None = None
        try:
            self._sync()
        except Exception as err:
            error = err
        except BaseException as err:  # answered all the same: no waiter is left waiting
            error = OSError(f"the request log could not be synced: {err!r}")
        finally:  # this thread holds the GIL from here until the hand-back below gives it up
            SWITCHING.returned()
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
