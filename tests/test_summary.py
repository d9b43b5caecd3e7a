"""The periodic info line of ``serve``: what was evaluated since the last one."""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from support import FRAMEWORKS, Server, trace_requests, wait_for

from collector.config import parse
from collector.otlp.received import Received
from collector.service import Chain
from collector.status.summary import Summary, log_periodically
from collector.testing import memory_store


async def _evaluate(chain: Chain, recording: Path) -> None:
    for request in trace_requests(recording):
        await chain.consume(Received("traces", request, "test"))
    await chain.sessions_stage.settle()
    await chain.sessions_stage.close_all("end_of_input")
    await chain.drain()


def _recording() -> Path:
    return sorted((FRAMEWORKS / "strands").glob("*.jsonl"))[0]


async def test_the_line_sums_what_the_chain_evaluated_since_the_last_one() -> None:
    chain = Chain(parse({}, anthropic_env=False), store=memory_store())
    chain.recorder.keep_closed = True
    summary = Summary(chain.registry)
    assert summary.line() is None  # nothing yet: no line
    await _evaluate(chain, _recording())
    coverages = chain.recorder.closed
    statuses = Counter(r.status for c in coverages for r in c.results)
    loads = Counter(row["status"] for c in coverages for row in c.to_dict()["skill_loads"])
    line = summary.line()
    await chain.runner.close()
    assert line is not None
    n = len(coverages)
    assert line.startswith(f"sessions: {n} closed, {n} evaluated; ")
    assert f"evaluations: {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))};" in line
    assert "judge: 0 calls, 0.0000 USD" in line  # no judge configured
    assert line.endswith(f"skill loads: {', '.join(f'{k} {v}' for k, v in sorted(loads.items())) or 'none'}")
    assert summary.line() is None  # the next interval saw nothing new


async def test_judge_calls_by_outcome_and_spend() -> None:
    chain = Chain(parse({}, anthropic_env=False), store=memory_store())
    summary = Summary(chain.registry)
    metrics = chain.runner.metrics
    metrics.judge_requests.labels("claude-sonnet-5-5", "ok").inc(3)
    metrics.judge_requests.labels("claude-sonnet-5-5", "rate_limited").inc()
    metrics.judge_cost.labels("claude-sonnet-5-5").inc(0.0123)
    line = summary.line()
    await chain.runner.close()
    assert line is not None and "judge: 4 calls (ok 3, rate_limited 1), 0.0123 USD" in line


async def test_logged_after_each_tick_only_when_something_happened(caplog: pytest.LogCaptureFixture) -> None:
    chain = Chain(parse({}, anthropic_env=False), store=memory_store())
    ticks: asyncio.Queue[None] = asyncio.Queue()
    done: asyncio.Queue[None] = asyncio.Queue()
    summary = Summary(chain.registry)

    async def tick() -> None:
        await done.put(None)  # the previous tick's line (if any) is written by now
        await ticks.get()

    log = logging.getLogger("test-summary")
    task = asyncio.create_task(log_periodically(summary, tick, log))
    caplog.set_level(logging.INFO, logger="test-summary")
    await done.get()
    await ticks.put(None)  # a tick with nothing evaluated
    await done.get()
    assert caplog.messages == []
    await _evaluate(chain, _recording())
    await ticks.put(None)
    await done.get()
    (message,) = caplog.messages
    assert message.startswith("since the last summary: sessions: ") and "closed" in message
    await ticks.put(None)  # nothing new again
    await done.get()
    assert len(caplog.messages) == 1
    task.cancel()
    await chain.runner.close()


def test_serve_logs_the_summary_line(tmp_path: Path) -> None:
    recording = _recording()
    srv = Server(tmp_path, {"status": {"summary_interval": "200ms"}})
    try:
        for request in trace_requests(recording):
            post = urllib.request.Request(
                f"{srv.http_url}/v1/traces",
                request.SerializeToString(),
                {"Content-Type": "application/x-protobuf"},
            )
            with urllib.request.urlopen(post, timeout=10) as resp:
                assert resp.status == 200
        line = wait_for(
            lambda: next(
                (x for x in srv.log().splitlines() if "since the last summary: sessions: 1 closed" in x), None
            ),
            timeout=30,
        )
        assert " INFO " in line and "evaluated" in line
    finally:
        srv.stop()
