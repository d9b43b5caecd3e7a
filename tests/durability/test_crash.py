"""kill -9 mid-stream, several times: every acknowledged span is accounted for, every
session revision is judged once, every result reaches the downstream, and twice only when
its batch was in flight at a kill (export is at least once, as OTLP exporters are)."""

from __future__ import annotations

import itertools
import json
import signal
import time
from pathlib import Path
from typing import Any

from export.downstream import Downstream
from fake_anthropic import FakeAnthropic, default_verdict, delay
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from perf.bench import recorded_session
from shared_tables import SharedTables
from support import Server, export_grpc, wait_for

SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"
SESSIONS = 36
KILL_AFTER = (7, 16, 27)  # kill -9 right after these sessions were acknowledged


def session_requests() -> list[tuple[str, bytes, int]]:
    """(session id, one Export request holding the whole session, span count)."""
    out = []
    for n in range(SESSIONS):
        name = f"crash-{n:03d}"
        request = recorded_session(n, name)
        out.append((name, request.SerializeToString(), sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)))
    return out


class _TimedDownstream(Downstream):
    """The downstream receiver, noting when each request arrived and from which connection
    (``context.peer()``: a server life's channel has a port of its own)."""

    def __init__(self) -> None:
        self.arrived: list[tuple[float, str, ExportTraceServiceRequest]] = []
        super().__init__("grpc")

    def _grpc_traces(self, request: ExportTraceServiceRequest, context: Any) -> Any:
        with self._lock:
            self.arrived.append((time.monotonic(), context.peer(), request))
        return super()._grpc_traces(request, context)


def test_kill_9_mid_stream_loses_nothing_and_judges_once(tmp_path: Path, shared: SharedTables) -> None:
    fake = FakeAnthropic().start()
    fake.script = lambda seen: delay(0.2, default_verdict(seen))  # judge calls in flight at each kill
    downstream = _TimedDownstream()
    config = {
        "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"},
        "judge": {"base_url": fake.base_url, "api_key": "test"},
        "skills": {"paths": [str(SKILLS)]},
        "evaluators": {"skill_omission": {"sampling": 100}},
        "expectations": [{"when": {"user_message": "(?i)release notes"}, "expect": ["release-notes"]}],
        "export": {"otlp": {"endpoint": downstream.endpoint, "protocol": "grpc",
                            "retry": {"initial_interval": "0.1s", "max_interval": "0.5s"}}},
    }
    config = shared.config(config)
    data = tmp_path / "data"

    def rows(sql: str) -> list[Any]:
        return shared.rows(data, sql)

    acked: dict[str, int] = {}
    server = Server(tmp_path, config)
    kills = 0
    killed_at: list[float] = []
    dead_at: list[float] = []  # the server reaped: nothing it sent can still be on its way
    try:
        for n, (session, body, spans) in enumerate(session_requests()):
            export_grpc(server, body)
            acked[session] = spans
            if n in KILL_AFTER:
                time.sleep(0.3 * (KILL_AFTER.index(n) + 1))  # a little later each time: open, closing, judging
                killed_at.append(time.monotonic())
                server.proc.send_signal(signal.SIGKILL)
                server.proc.wait()
                dead_at.append(time.monotonic())
                kills += 1
                server = Server(tmp_path, config)
        wait_for(lambda: len(rows("SELECT 1 FROM coverage")) >= len(acked), timeout=90, interval=0.3)
        wait_for(lambda: not rows("SELECT 1 FROM outbox"), timeout=60, interval=0.3)
    finally:
        code = server.stop()
        fake.stop()
    assert kills == len(KILL_AFTER) and code == 0
    assert "recovered from the spool" in server.log()

    # Every acknowledged span is accounted for: one evaluated revision per session, all spans in it.
    coverage = {s: json.loads(r) for s, r in rows("SELECT session, record FROM coverage")}
    assert sorted(coverage) == sorted(acked)
    assert {s: c["spans"] for s, c in coverage.items()} == acked
    assert all(c["revision"] == 1 for c in coverage.values())

    # Judged once: every verdict on record was asked for once, except calls the kill cut off
    # before their verdict was committed (the judge answers in 0.2 s and a verdict is committed
    # as it arrives, by the writer thread: on a loaded 2-core machine that thread can wait for
    # the GIL well past the answer, so calls that started up to 1 s before a kill may be asked
    # again; every other call may not).
    results = [r for c in coverage.values() for r in c["results"]]  # each coverage line holds its results
    judged_rows = [r for r in results if r["judge"] is not None]
    assert judged_rows, "the judge was never called: the test proves nothing"
    # Each verdict was also committed on its own as it arrived, for reuse after a kill.
    verdicts = [json.loads(r) for (r,) in rows("SELECT record FROM results WHERE superseded = 0")]
    assert sorted(json.dumps(v, sort_keys=True) for v in verdicts) == sorted(
        json.dumps(r, sort_keys=True) for r in judged_rows
    )
    cut_off = sum(
        1 for seen in fake.requests for k, dead in zip(killed_at, dead_at, strict=True) if k - 1.0 <= seen.at <= dead
    )
    repeated = len(fake.requests) - len(judged_rows)
    assert 0 <= repeated <= cut_off, (repeated, cut_off)

    # Exported: every result and coverage span arrived. A span arrives again only after a
    # kill: the downstream took its batch before the server committed that the batch was
    # sent (at least once: the restart sends it again, with the same span ids).
    arrivals: dict[bytes, list[tuple[float, str]]] = {}
    for at, peer, req in downstream.arrived:
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    arrivals.setdefault(span.span_id, []).append((at, peer))
    assert len(arrivals) == len(results) + len(coverage)
    assert len({peer for _, peer, _ in downstream.arrived}) > 1, "no life after a kill exported: the test proves nothing"
    for span_id, sent in arrivals.items():
        # Sent again only by a later life: each later arrival came over another connection
        # than the one before it, after a kill's server was reaped.  (When the one before it
        # arrived is no evidence: the downstream may handle a batch sent just before a kill
        # after it, on a loaded machine.)
        for (_, peer_before), (after, peer_after) in itertools.pairwise(sent):
            assert peer_before != peer_after and any(dead <= after for dead in dead_at), (
                f"span {span_id.hex()} arrived twice within one server life"
            )
    downstream.stop()
