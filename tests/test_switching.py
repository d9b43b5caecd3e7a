"""Serve's switch interval: long only while requests wait to be assembled and no sync runs;
never changed by a ``Switching`` that was not started (replay, tests)."""

from __future__ import annotations

import threading

import pytest

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
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.start()
    switching.backlog(True)
    inside, release = threading.Event(), threading.Event()
    seen: list[float | None] = []

    def held() -> None:
        inside.set()
        assert release.wait(10)

    thread = threading.Thread(target=switching.synced, args=(held,))
    thread.start()
    assert inside.wait(10)
    switching.synced(lambda: seen.append(switching.interval))  # a second, overlapping
    seen.append(switching.interval)  # the first still runs
    release.set()
    thread.join(10)
    assert seen == [SHORT, SHORT] and switching.interval == LONG
    assert intervals == [SHORT, LONG, SHORT, LONG]


def test_a_sync_that_raises_leaves_the_interval_as_it_was() -> None:
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.start()
    switching.backlog(True)

    def failing() -> None:
        raise OSError("disk")

    with pytest.raises(OSError):
        switching.synced(failing)
    assert switching.interval == LONG


def test_not_started_changes_nothing() -> None:
    intervals: list[float] = []
    switching = Switching(intervals.append)
    switching.backlog(True)
    switching.synced(lambda: None)
    assert intervals == [] and switching.interval is None
