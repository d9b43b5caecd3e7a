from __future__ import annotations

import compileall
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import Server

ROOT = Path(__file__).parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The sources byte-compiled once, before any test, in the process that starts the others
    (xdist's workers and every ``skillgauge`` the tests run then load the bytecode).  With
    ``PYTHONDONTWRITEBYTECODE`` set, as it is here, no process writes any: each one compiled
    every module it imported, ~0.4 s of CPU for each of the suite's hundreds of processes."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        for folder in ("collector", "evaluators", "tests"):
            compileall.compile_dir(ROOT / folder, quiet=2, rx=re.compile(r"[/\\]fixtures[/\\]"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    srv.stop()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: two workers for each core.  A worker spends about half its time waiting
    on what its tests started (serve, PostgreSQL, the Collector, Chromium, Prometheus) or on
    their timers, time in which one worker a core would leave its core idle (measured on 2
    cores: 3 workers kept the cores 68 % busy, 4 workers 94 %).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS``, when set, decides instead."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))
