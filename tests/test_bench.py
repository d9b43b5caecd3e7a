"""The benchmark's short mode runs in CI so it cannot rot (its figures are not asserted:
speed is measured by running the benchmark, not by timed unit tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parent / "perf" / "bench.py"


def test_bench_short_mode_prints_its_figures_as_the_last_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--short"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    for key in ("ingest_spans_per_s", "decode_limit_spans_per_s", "ratio", "export_p99_ms", "rss_bytes_per_open_session"):
        assert figures[key] > 0, key
    assert figures["short"] is True


def test_judge_call_cost_prints_a_line_for_each_way() -> None:
    script = Path(__file__).parent / "perf" / "judge_call_cost.py"
    run = subprocess.run(
        [sys.executable, str(script), "--calls", "20", "--rounds", "1"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["sdk", "aiohttp", "judge"]
    assert all(float(line.split()[1]) > 0 for line in lines)


def test_session_cost_prints_a_line_for_each_step() -> None:
    script = Path(__file__).parent / "perf" / "session_cost.py"
    run = subprocess.run(
        [sys.executable, str(script), "--sessions", "40", "--rounds", "1"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    steps = [line.split()[0] for line in lines[1:]]
    assert steps == ["unpickle", "plan", "results", "coverage", "metrics", "store", "all"]
    assert all(float(line.split()[1]) > 0 for line in lines[1:])
