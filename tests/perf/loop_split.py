"""Where a served replica's event loop spends its CPU, beside ``skillgauge replay`` of the same
traffic: thread CPU time by event-loop callback (and by probed function), in us a span.

    python tests/perf/loop_split.py                 # runs bench.py --ingest-only --replicas 2
    python tests/perf/loop_split.py --probes collector.sessions.closing:Closing._close,...
    python tests/perf/loop_split.py --summarise DIR # the figures of an earlier run's folder

It runs ``tests/perf/bench.py --ingest-only`` with ``tests/perf/loop_split/`` first on
``PYTHONPATH`` and ``SKILLGAUGE_LOOP_SPLIT`` set, so that every replica and the benchmark's own
in-process replay count their loop's callbacks (``loop_split/sitecustomize.py``).  Replicas
are read over seconds 7-22 of the saturation phase (counted from their first request), by the
spans each acknowledged (bench's per-replica rate); the in-process figures over the three
passes' spans.  Run it from a build's tree (``serve`` imports the code of its working
directory); it adds ~1 us a callback, so compare its lines with each other, not with bench's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# What the chain runs on the loop in both (a span placed, closed, evaluated, recorded), and
# what only serve runs (the receivers, the spool's append, the reopen cache).
PROBES = [
    "collector.receiver.decode:decode",
    "collector.receiver.http:_read_body",
    "collector.receiver.grpc:_message",
    "collector.spool.stage:SpoolStage.consume",
    "collector.state.requestlog:RequestLog.append",
    "collector.state.segments:Segments.append_locked",
    "collector.sessions.stage:checking_spans",
    "collector.sessions.stage:SessionsStage._rebuild",
    "collector.sessions.stage:SessionsStage._forward",
    "collector.sessions.assembler:Assembler.close_due",
    "collector.sessions.assembler:Assembler.close_all",
    "collector.sessions.closing:Closing._close",
    "collector.sessions.kept:Kept._keep",
    "collector.detect.session:SessionEvidence.finish",
    "collector.evaluate.runner:Runner.consume",
    "collector.state.recorder:Recorder._record",
    "collector.replay:sized_requests_in",
]
_RECEIVED = ("task RequestHandler._handle_request", "task _handle_exceptions")  # a replica's first requests
_FROM, _TO = 7, 22  # seconds into saturation


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _window(lines: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dumps ``_FROM`` and ``_TO`` seconds after the replica's first request."""
    first = next(i for i, line in enumerate(lines) if any(k in line["totals"] for k in _RECEIVED))
    return lines[first + _FROM], lines[first + _TO]


Figures = dict[str, dict[str, tuple[float, int, float]]]


def _per_span(end: list[float], start: list[float] | None, spans: float) -> tuple[float, int, float]:
    before = start or [0.0, 0, 0.0]
    gc_after, gc_before = (end[2] if len(end) > 2 else 0.0), (before[2] if len(before) > 2 else 0.0)
    return (end[0] - before[0]) / spans * 1e6, int(end[1] - before[1]), (gc_after - gc_before) / spans * 1e6


def summarise(folder: Path) -> Figures:
    """Per replica and in process: key -> (us a span, calls, us a span of it collecting
    garbage); the main thread's CPU under ``main thread``."""
    bench = (folder / "bench.txt").read_text()
    bench_pid = int(_found(r"pid (\d+)", bench))
    rates = [float(r.replace(",", "")) for r in _found(r"per replica: ([\d, ]+) spans/s", bench).split(", ")]
    spans_in_process = 3 * int(_found(r"traffic: \d+ requests, (\d+) spans", bench))
    replicas = sorted(
        (p for p in folder.glob("*.jsonl") if int(p.stem) != bench_pid), key=lambda p: int(p.stem)
    )
    out: Figures = {}
    for n, (path, rate) in enumerate(zip(replicas, rates, strict=False)):
        start, end = _window(_lines(path))
        spans = rate * (end["t"] - start["t"])
        figures = {
            key: _per_span(totals, start["totals"].get(key), spans) for key, totals in end["totals"].items()
        }
        figures["main thread"] = ((end["main_thread"] - start["main_thread"]) / spans * 1e6, 0, 0.0)
        out[f"replica {n}"] = figures
    own = folder / f"{bench_pid}.jsonl"
    if own.exists():
        last = _lines(own)[-1]["totals"]
        out["in process"] = {k: _per_span(totals, None, spans_in_process) for k, totals in last.items()}
    return out


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise SystemExit(f"bench.txt has no line matching {pattern!r}: did the benchmark finish?")
    return match.group(1)


def show(figures: Figures, rows: int) -> None:
    """Each key's us a span, its calls and the part of it collecting garbage, by column."""
    columns = list(figures)

    def largest(key: str) -> float:
        return -max(f.get(key, (0.0, 0, 0.0))[0] for f in figures.values())

    keys = sorted({k for f in figures.values() for k in f}, key=largest)
    print(f"{'us a span: all, of it gc (calls)':60s}" + "".join(f"{c:>28s}" for c in columns))
    callbacks = [
        sum(v for k, (v, _, _) in figures[c].items() if not k.startswith(("fn ", "main"))) for c in columns
    ]
    print(f"{'sum of callbacks (probes, fn, overlap them)':60s}" + "".join(f"{v:28.2f}" for v in callbacks))
    for key in keys[:rows]:
        cells = "".join(
            f"{us:10.2f} {gc_us:7.2f} {calls:>9d}"
            for us, calls, gc_us in (figures[c].get(key, (0.0, 0, 0.0)) for c in columns)
        )
        print(f"{key[:60]:60s}{cells}")


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--summarise", metavar="DIR", help="only print the figures of an earlier run's folder")
    args.add_argument("--out", metavar="DIR", help="the folder for the dumps (default: a new temporary one)")
    args.add_argument("--probes", default=",".join(PROBES), help="module:[Class.]function, comma-separated")
    args.add_argument("--rows", type=int, default=40)
    opts = args.parse_args(argv)
    if opts.summarise:
        show(summarise(Path(opts.summarise)), opts.rows)
        return 0
    folder = Path(opts.out or tempfile.mkdtemp(prefix="loop-split-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SKILLGAUGE_LOOP_SPLIT": str(folder),
        "SKILLGAUGE_LOOP_PROBES": opts.probes,
        "PYTHONPATH": os.pathsep.join(
            [str(HERE / "loop_split"), os.getcwd(), os.environ.get("PYTHONPATH", "")]
        ),
    }
    with (folder / "bench.txt").open("w") as log:
        subprocess.run(
            [sys.executable, str(HERE / "bench.py"), "--ingest-only", "--replicas", "2"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    print(f"dumps in {folder}")
    show(summarise(folder), opts.rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
