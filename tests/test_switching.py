"""Serve's switch interval: long only while requests wait to be assembled and no sync runs;
never changed by a ``Switching`` that was not started (replay, tests)."""

from __future__ import annotations

import threading

from collector.switching import LONG, SHORT, Switching


def test_long_with_a_backlog_short_without_one() -> None:
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.start()
    switching.backlog(True)
    switching.backlog(True)  # no change: nothing set again
    switching.backlog(False)
    assert intervals == [SHORT, LONG, SHORT]


def test_short_while_any_sync_runs() -> None:
    """From each sync's hand-off until it returned, on whichever threads they are told."""
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.start()
    switching.backlog(True)
    switching.handed()
    switching.handed()  # a second, overlapping
    seen = [switching.interval]
    thread = threading.Thread(target=switching.returned)  # the first returns on its own thread
    thread.start()
    thread.join(10)
    seen.append(switching.interval)  # the second still runs
    switching.returned()
    assert seen == [SHORT, SHORT] and switching.interval == LONG
    assert intervals == [SHORT, LONG, SHORT, LONG]


def test_not_started_changes_nothing() -> None:
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.backlog(True)
    switching.handed()
    switching.returned()
    assert intervals == [] and switching.interval is None
