"""The sources as they are, interpreted: what a pure-Python install (HATCH_BUILD_NO_HOOKS=true)
runs.  The rest of the suite runs the modules compiled by mypyc, and some code means one
thing compiled and another interpreted (a frozen dataclass setting its own fields in a
written ``__init__`` works compiled and raises interpreted), so every recording is replayed
both ways and the records compared."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import FRAMEWORKS, iter_json_lines

ROOT = Path(__file__).resolve().parents[1]


def sources_only(to: Path) -> Path:
    """A copy of both packages without their compiled modules."""
    for package in ("collector", "evaluators"):
        shutil.copytree(ROOT / package, to / package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return to


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # before the editable install's path
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_every_recording_replays_the_same_interpreted_as_compiled(tmp_path: Path) -> None:
    tree = sources_only(tmp_path / "src")
    where = run(tree, "-c", "import collector.spans, evaluators.result as r; print(collector.spans.__file__, r.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(p.startswith(str(tree)) and p.endswith(".py") for p in where.stdout.split()), where.stdout

    recordings = sorted(str(p) for p in FRAMEWORKS.iterdir() if p.is_dir())
    compiled = run(ROOT, "-m", "collector", "replay", *recordings, "--format", "json")
    interpreted = run(tree, "-m", "collector", "replay", *recordings, "--format", "json")
    assert compiled.returncode == 0, compiled.stderr
    assert interpreted.returncode == 0, interpreted.stderr[-3000:]
    records = list(iter_json_lines(compiled.stdout))
    assert sum("coverage" in r for r in records) >= 30  # every framework's sessions
    assert list(iter_json_lines(interpreted.stdout)) == records
