"""The README's lint command runs with the tests: ruff (lint, and format for ``collector`` and
``evaluators``) and mypy strict, so that "ruff clean, mypy strict" holds on every CI run.

mypy keeps its incremental cache outside the repository
(``${SKILLGAUGE_MYPY_CACHE:-${XDG_CACHE_HOME:-~/.cache}/skillgauge/mypy}``, as the Collector's
build is kept): a module whose source hash is unchanged, wherever the checkout is, is not
checked again, and one that changed is checked with every module that depends on it.  A
cold run takes ~23 s of CPU, a warm one ~1 s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    run = _run(str(BIN / "ruff"), "check", ".")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_collector_and_evaluators_are_formatted() -> None:
    run = _run(str(BIN / "ruff"), "format", "--check", "collector", "evaluators")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _mypy_cache() -> Path:
    if os.environ.get("SKILLGAUGE_MYPY_CACHE"):
        return Path(os.environ["SKILLGAUGE_MYPY_CACHE"])
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "skillgauge" / "mypy"


def test_mypy_strict_finds_nothing() -> None:
    run = _run(sys.executable, "-m", "mypy", "--cache-dir", str(_mypy_cache()))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
