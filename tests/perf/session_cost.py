"""What the server spends on each closed session: ``python tests/perf/session_cost.py``.

The benchmark's sessions are small (~9 spans), so at saturation the server closes a few
thousand a second, and what it does per session counts beside what it does per span.  This
builds the benchmark's sessions (recorded framework sessions, re-keyed) in process, then
times each step ``serve`` takes for a session once it closes, with no judge configured (as
in the benchmark's ingest phase):

  close      ``Assembler.close_all``: each session's evidence finished (``SessionEvidence.finish``,
             the passes at close), bodies bounded, kept for reopening (idle timeout, in memory)
  plan       ``evaluators.suite.plan``: every deterministic row, judge rows skipped
  results    each result as the JSON record the spool stores
  coverage   the coverage line, the same way
  metrics    ``CoverageMetrics.sessions_evaluated_together``, in the recorder's batches
  index      ``index.index_revisions`` (in the store's writer thread, off the event loop):
             the row /v1/sessions lists and /v1/sessions/{id} serves, each line parsed again;
             each round stores revisions not stored before (the sessions under fresh ids)
  index_dicts  the same rows from the dicts the recorder already has (what it does; "all"
             counts this one)

Each figure is the least process CPU time of ``--rounds`` passes, in microseconds a
session.  The figures drift with the machine; compare the lines of one run, or runs of two
trees in turn.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import bench  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from prometheus_client import CollectorRegistry  # noqa: E402

from collector.config import parse  # noqa: E402
from collector.db import migrate  # noqa: E402
from collector.db.shared import Db  # noqa: E402
from collector.evaluate.runner import settings_from  # noqa: E402
from collector.gcpolicy import GC_POLICY  # noqa: E402
from collector.sessions.assembler import Assembler  # noqa: E402
from collector.state import index, recorder  # noqa: E402
from collector.state.metrics import CoverageMetrics  # noqa: E402
from collector.state.types import encode_record, with_results  # noqa: E402
from evaluators import suite  # noqa: E402
from evaluators.evidence import Session  # noqa: E402
from evaluators.registry import SkillRegistry  # noqa: E402
from evaluators.result import Coverage, EvaluationResult  # noqa: E402


def open_sessions(bodies: list[bytes], closed: list[Session]) -> Assembler:
    """An assembler holding the sessions of ``bodies`` open; each it closes goes to ``closed``."""
    assembler = Assembler(parse({}).sessions, lambda session, reason: closed.append(session))
    for n, body in enumerate(bodies):
        assembler.add_spans(ExportTraceServiceRequest.FromString(body), n + 1, raw=body)
    return assembler


def best(step: Callable[[], Any], rounds: int, count: int, setup: Callable[[], Any] | None = None) -> float:
    """The least CPU time (this process's: the machine's other work does not count) of
    ``rounds`` runs of ``step`` (after ``setup``, not counted, when given), in microseconds for
    each of ``count``."""
    fastest = float("inf")
    for _ in range(rounds):
        if setup is not None:
            setup()
        gc.collect()  # the last round's garbage, not counted
        start = time.process_time()
        step()
        fastest = min(fastest, time.process_time() - start)
    return fastest / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    GC_POLICY.start(None)  # collected as serve collects (a full collection, once due, is left out)

    bodies = bench.requests_for(args.sessions)[0]
    sessions: list[Session] = []
    open_sessions(bodies, sessions).close_all("idle_timeout")
    held: list[Assembler] = []  # the next round's open sessions (built untimed)

    def reopen() -> None:
        held[:] = [open_sessions(bodies, [])]

    settings = settings_from(parse({}), SkillRegistry(), judge_available=False)
    coverages = [
        Coverage(s, [r for r in suite.plan(s, settings).slots if isinstance(r, EvaluationResult)])
        for s in sessions
    ]
    records = [
        ([encode_record(r.to_dict()) for r in c.results], encode_record(c.to_dict())) for c in coverages
    ]
    metrics = CoverageMetrics(CollectorRegistry())
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate.create_empty(db)
    lines = [
        (c.session.session_id, c.session.revision, with_results(line, results), 0.0)
        for c, (results, line) in zip(coverages, records, strict=True)
    ]
    # What the recorder has in hand when it saves (it made the records from them).
    dicts = [{**c.to_dict(), "results": [r.to_dict() for r in c.results]} for c in coverages]
    # Each round's index steps store revisions not stored before, as the recorder does:
    # the same sessions under fresh ids (made untimed).
    fresh: list[tuple[list[index.Indexed], list[dict[str, Any]]]] = []

    def renamed() -> None:
        k = len(fresh)
        fresh.append(
            (
                [(f"{s}~{k}", r, record, at) for s, r, record, at in lines],
                [{**d, "session_id": f"{d['session_id']}~{k}"} for d in dicts],
            )
        )

    n = len(sessions)
    batch = recorder.RECORD_BATCH  # sessions the recorder records (and counts) together
    spans = sum(s.span_count for s in sessions)
    results = sum(len(c.results) for c in coverages)
    print(f"{n} sessions, {spans / n:.1f} spans and {results / n:.1f} results a session")
    steps: dict[str, Callable[[], Any]] = {
        "close": lambda: held[0].close_all("idle_timeout"),
        "plan": lambda: [suite.plan(s, settings) for s in sessions],
        "results": lambda: [[encode_record(r.to_dict()) for r in c.results] for c in coverages],
        "coverage": lambda: [encode_record(c.to_dict()) for c in coverages],
        "metrics": lambda: [
            metrics.sessions_evaluated_together((c.session, c.results, 0.1) for c in coverages[i : i + batch])
            for i in range(0, n, batch)
        ],
        "index": lambda: index.index_revisions(Db(db, "sqlite"), fresh[-1][0]),
        # The recorder's way: the listing's columns from the dicts it has (no parse).
        "index_dicts": lambda: index.store(Db(db, "sqlite"), index.prepare(*fresh[-1])),
    }
    total = 0.0
    for name, step in steps.items():
        setup = {"close": reopen, "index": renamed, "index_dicts": renamed}.get(name)
        us = best(step, args.rounds, n, setup)
        total += us if name != "index" else 0.0  # the recorder's path is index_dicts
        print(f"{name:9} {us:6.1f} us a session")
    print(f"{'all':9} {total:6.1f} us a session ({total / (spans / n):.1f} us a span)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
