"""The README's lint command runs with the tests: ruff (lint, and format for ``collector`` and
``evaluators``) and mypy strict, so that "ruff clean, mypy strict" holds on every CI run."""

from __future__ import annotations

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


def test_mypy_strict_finds_nothing(tmp_path: Path) -> None:
    run = _run(sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
