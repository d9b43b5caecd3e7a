"""How long a thread may hold the GIL while another waits for it (``sys.setswitchinterval``),
as serve sets it.

The store's threads (its writer, the sync of appended requests) give the GIL away in every
SQLite or disk call and must win it back from the event loop.  A short interval (``SHORT``)
makes a busy loop hand it over soon: an acknowledgement does not wait long behind another
thread's work, but every hand-off costs the loop its caches.  So the interval is:

- ``LONG`` (Python's default) while the loop has a backlog (``backlog(True)``: many requests wait
  to be assembled behind the one being assembled), when CPU a request is what bounds how much
  is taken;
- ``SHORT`` otherwise, and always while a sync is handed to its thread or runs (from ``handed``
  until ``returned``): that thread wins the GIL within ``SHORT``, to start
  the sync and to hand its outcome back, so the acknowledgements waiting on it do not wait
  longer.  A thread waiting for the GIL asks the holder to drop it only after a whole interval
  in which no other thread took it; a loop that gives the GIL up and takes it straight back in
  every turn (each ``select``) more often than that starves it.  With a turn of ~2 ms and
  ``LONG``, a waiting thread waited up to seconds.

Only a started ``Switching`` (``start``: serve) changes the interval: replay and tests leave
the process's own alone.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

SHORT = 0.0005
LONG = 0.005


class Switching:
    """Sets the switch interval from the loop's backlog and the syncs running; ``set_interval``
    is the seam (``sys.setswitchinterval``)."""

    def __init__(self, set_interval: Callable[[float], None] = sys.setswitchinterval) -> None:
        self._set_interval = set_interval
        self._lock = threading.Lock()  # ``backlog`` is told on the loop, ``returned`` off it
        self._started = False
        self._backlog = False
        self._syncs = 0  # running now
        self.interval: float | None = None  # as last set (None: never)

    def start(self) -> None:
        with self._lock:
            self._started = True
            self._apply()

    def backlog(self, waiting: bool) -> None:
        """Whether requests wait to be assembled behind the one being assembled (loop only)."""
        if waiting != self._backlog:
            with self._lock:
                self._backlog = waiting
                self._apply()

    def handed(self) -> None:
        """A sync is handed to another thread (on any thread): ``SHORT`` until ``returned``."""
        with self._lock:
            self._syncs += 1
            self._apply()

    def returned(self) -> None:
        """A sync ``handed`` on has returned and its outcome is handed back (on any thread)."""
        with self._lock:
            self._syncs -= 1
            self._apply()

    def _apply(self) -> None:
        if not self._started:
            return
        interval = LONG if self._backlog and not self._syncs else SHORT
        if interval != self.interval:
            self.interval = interval
            self._set_interval(interval)


# The process's (the interval is one for all its threads).
SWITCHING = Switching()
