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

``--store`` measures instead what the store's threads spend, served-like, in process: the
benchmark's traffic (``--passes`` passes, fresh ids each) through serve's chain with a
durable store in a temporary data directory, sent at ``--rate`` requests a second, sessions
closed by a 2 s idle timeout (kept for reopening, as served; ``replay`` closes them at the
end of its input, kept by nothing): the store's writer thread's and the WAL checkpointer's
own CPU time (their thread clocks), the process's, garbage collection's, in microseconds a
span, the writer's commits, and how long a closed session's account lives until it is
counted (close to the recorder's metrics, mean): what closing keeps alive meanwhile.

``--writer`` measures the store's writer thread alone, with nothing else on the loop: the
benchmark's sessions' accounts (made untimed; ``--passes`` times, fresh ids each) closed
``--wave`` a second as serve closes them (closed row, kept for reopening, the oldest beyond
``sessions.reopen_cache`` let go, recorded), a checkpoint every
``storage.checkpoint_interval``; the writer thread's CPU in microseconds a session.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import sqlite3
import sys
import tempfile
import threading
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


def thread_cpu(name: str) -> float:
    """CPU seconds of this process's thread ``name`` so far (0 when there is none)."""
    for thread in threading.enumerate():
        if thread.name == name and thread.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return 0.0


async def store_cost(traffic: list[bytes], spans: int, rate: float, data: str) -> dict[str, float]:
    """``traffic`` through serve's chain on a durable store in ``data`` at ``rate`` requests a
    second; the store's threads' CPU and the rest (see ``--store``)."""
    from collector.otlp.received import Received
    from collector.receiver import decode
    from collector.replay import _take
    from collector.service import Chain

    chain = Chain(parse({"sessions": {"idle_timeout": "2s"}, "storage": {"path": data}}))
    await chain.start()
    lags: list[float] = []
    metrics = chain.recorder.metrics
    count = metrics.sessions_evaluated_together

    def counted(evaluated: Any) -> None:
        items = list(evaluated)
        lags.extend(lag for _, _, lag in items)
        count(items)

    metrics.sessions_evaluated_together = counted  # type: ignore[method-assign]
    timer = bench.GcTimer()
    gc.callbacks.append(timer.observe)
    writer, checkpointer = thread_cpu("skillgauge-spool"), thread_cpu("skillgauge-wal")
    process, commits = time.process_time(), chain.store.commits  # type: ignore[attr-defined]
    start = time.monotonic()
    for n, body in enumerate(traffic):
        await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
        await _take(chain, Received("traces", decode.decode("traces", body, "protobuf"), "replay", raw=body))
    while chain.sessions_stage.assembler.open_count:  # each closes 2 s after its last span
        await asyncio.sleep(0.2)
    await chain.drain()
    await chain.store.transact(lambda db: None)  # what was queued before is committed
    figures = {
        "writer": (thread_cpu("skillgauge-spool") - writer) / spans * 1e6,
        "checkpointer": (thread_cpu("skillgauge-wal") - checkpointer) / spans * 1e6,
        "process": (time.process_time() - process) / spans * 1e6,
        "gc": timer.seconds / spans * 1e6,
        "commits": float(chain.store.commits - commits),  # type: ignore[attr-defined]
        "lag_ms": sum(lags) / max(1, len(lags)) * 1e3,
    }
    gc.callbacks.remove(timer.observe)
    await chain.shutdown(10)
    return figures


async def writer_cost(sessions: list[Session], rounds: int, wave: int, data: str) -> float:
    """The store's writer thread's CPU a session (us) with nothing else on the loop: the
    accounts of ``sessions`` (``rounds`` times, fresh ids each) closed ``wave`` a second with
    their closed rows, kept for reopening (the oldest past ``reopen_cache`` let go), recorded,
    a checkpoint every ``checkpoint_interval`` (see ``--writer``)."""
    from collector.export.fanout import Fanout
    from collector.state.facade import Store
    from collector.state.recorder import Evaluated, Recorder
    from collector.state.types import Closed, Reopenable

    config = parse({})
    settings = settings_from(config, SkillRegistry(), judge_available=False)
    store = Store(data)
    record = Recorder(store, CoverageMetrics(CollectorRegistry()), Fanout())
    kept: list[str] = []
    trace = ("ab" * 16,)
    writer, done = thread_cpu("skillgauge-spool"), 0
    checkpointed = time.monotonic()
    for round_ in range(rounds):
        for start in range(0, len(sessions), wave):
            tick = time.monotonic()
            request = await store.append("traces", b"x" * 64)
            for session in sessions[start : start + wave]:
                session = copy.copy(session)
                session.session_id = f"{session.session_id}~{round_}"
                key = session.key
                store.record_closed(Closed(key, 1, "idle_timeout", request, request, trace))
                results = [r for r in suite.plan(session, settings).slots if isinstance(r, EvaluationResult)]
                store.keep_reopenable(Reopenable(key, 1, request, (request,), trace, session.span_count))
                kept.append(key)
                if len(kept) > config.sessions.reopen_cache:
                    store.forget_reopenable(kept.pop(0))
                await record.consume(Evaluated(Coverage(session, results), time.monotonic()))
                done += 1
            if time.monotonic() - checkpointed >= config.storage.checkpoint_interval:
                checkpointed = time.monotonic()
                await store.checkpoint(request)
            await asyncio.sleep(max(0.0, tick + 1.0 - time.monotonic()))
    await record.drain(60)
    await store.transact(lambda db: None)  # what was queued before is committed
    used = thread_cpu("skillgauge-spool") - writer
    await store.shutdown()
    return used / done * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--store", action="store_true", help="the store's threads, served-like (see above)")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--rate", type=float, default=10.0, help="requests a second (512 spans each)")
    parser.add_argument("--writer", action="store_true", help="the store's writer alone (see above)")
    parser.add_argument("--wave", type=int, default=700, help="sessions closed a second, with --writer")
    args = parser.parse_args(argv)
    GC_POLICY.start(None)  # collected as serve collects (a full collection, once due, is left out)
    if args.writer:
        closed: list[Session] = []
        open_sessions(bench.requests_for(2000)[0], closed).close_all("idle_timeout")
        with tempfile.TemporaryDirectory() as data:
            us = asyncio.run(writer_cost(closed, args.passes, args.wave, data))
        print(
            f"{len(closed) * args.passes} sessions, {args.wave} a second: writer thread {us:.1f} us a session"
        )
        return 0
    if args.store:
        bodies, spans = bench.requests_for(2000)
        traffic = [bench.fresh(body, n) for n in range(1, args.passes + 1) for body in bodies]
        with tempfile.TemporaryDirectory() as data:
            figures = asyncio.run(store_cost(traffic, spans * args.passes, args.rate, data))
        print(
            f"{spans * args.passes} spans: writer thread {figures['writer']:.2f} us a span, WAL checkpointer "
            f"{figures['checkpointer']:.2f}, process {figures['process']:.1f}, of it garbage collection "
            f"{figures['gc']:.2f}; {figures['commits']:.0f} commits; close to counted {figures['lag_ms']:.0f} ms"
        )
        return 0

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
