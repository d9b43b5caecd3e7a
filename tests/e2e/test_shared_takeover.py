"""Judge work that outlives its replica, against three ``skillgauge serve`` sharing one real
PostgreSQL (``storage.shared``) started for this module, the real ``anthropic`` client and a
fake Messages API on loopback: sessions close on replica A while the judge is away (their
judge work queued, leased to A) and the downstream is down (A's exports wait); A is killed
with SIGKILL; the judge and the downstream come back.  Another replica takes A's revisions
over once A's lease lapses, from the evidence in the shared store: the judge is asked once
per evaluation, every replica's session page shows the verdicts, each replica's metrics count
what it finished, once, and the downstream sees each span once."""

from __future__ import annotations

import json
import signal
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from durability.test_judge_outage import config as judge_config
from durability.test_judge_outage import judge_away, judge_rows
from export.downstream import Downstream
from perf.bench import recorded_session
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server
from support import Server, export_grpc, wait_for

JUDGED = ("skill_selection_accuracy", "skill_instruction_following", "skill_omission")


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as db:
        return [tuple(row) for row in db.execute(sql).fetchall()]


def _count(url: str, sql: str) -> int:
    return int(_rows(url, sql)[0][0])


def _evaluated(server: Server) -> float:
    """``skillgauge_sessions_evaluated_total``, summed over its series."""
    total = 0.0
    for line in server.metrics().splitlines():
        if line.startswith("skillgauge_sessions_evaluated_total"):
            total += float(line.rpartition(" ")[2])
    return total


def test_a_killed_replicas_judge_work_is_finished_once_by_another(
    postgres_server: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = postgres_server.url()
    outage, fake = judge_away()
    outage.down = False  # up for the first session, away for the rest
    downstream = Downstream("grpc", fail_first=10**9)  # down until the test says otherwise
    cfg = {
        **judge_config(fake.base_url),
        "storage": {"shared": url, "lease": "2s"},
        "export": {
            "otlp": {
                "endpoint": downstream.endpoint,
                "protocol": "grpc",
                "retry": {"initial_interval": "0.1s", "max_interval": "0.3s"},
            }
        },
    }
    a, b, c = (Server(_dir(tmp_path / name), cfg) for name in "abc")
    survivors = (b, c)
    early, killed = "early-0", [f"killed-{n}" for n in range(1, 4)]
    try:
        # Judged on a, its spans waiting in the outbox (the downstream is down).
        export_grpc(a, recorded_session(0, early).SerializeToString())
        wait_for(lambda: _count(url, "SELECT COUNT(*) FROM coverage") == 1, timeout=60, interval=0.2)
        outage.down = True
        for n, name in enumerate(killed, start=1):
            export_grpc(a, recorded_session(n, name).SerializeToString())
        # Each closed on a, its judge work queued and leased to a, which keeps failing to call.
        refused = outage.refused
        wait_for(
            lambda: (
                _count(url, "SELECT COUNT(*) FROM judge_revisions") == len(killed)
                and outage.refused > refused
            ),
            timeout=60,
            interval=0.2,
        )
        owners = {owner for (owner,) in _rows(url, "SELECT lease_owner FROM judge_revisions")}
        assert len(owners) == 1 and owners.pop().endswith(str((tmp_path / "a" / "data").resolve()))
        assert _count(url, "SELECT COUNT(*) FROM coverage") == 1  # nothing of theirs ended unjudged
        verdicts_before = outage.verdicts
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        outage.down = False  # the judge is back, and the downstream; a is not
        downstream.fail_first = 0
        wait_for(
            lambda: (
                _count(url, "SELECT COUNT(*) FROM coverage") == 1 + len(killed)
                and _count(url, "SELECT COUNT(*) FROM judge_revisions") == 0
                and _count(url, "SELECT COUNT(*) FROM outbox") == 0
            ),
            timeout=90,
            interval=0.2,
        )
        records = {s: json.loads(r) for s, r in _rows(url, "SELECT session, record FROM coverage")}
        taken = {name: records[name] for name in killed}
        judge = judge_rows(taken)
        # One call per evaluation: no judge row of the revisions taken over ended unjudged,
        # and the judge answered exactly as many calls after a died as they hold verdicts.
        assert judge and not [r for r in judge if r["status"] in ("error", "skipped")]
        judge = [r for r in judge if r["judge"]]
        assert judge
        assert outage.verdicts - verdicts_before == len(judge)
        for name in killed:  # every live replica's page shows the verdicts
            for server in survivors:
                status, body = server.get_json(f"/v1/sessions/{urllib.parse.quote(name)}")
                assert status == 200, body
                shown = [
                    r for rev in body["revisions"] for r in rev["records"] if r.get("evaluation") in JUDGED
                ]
                assert {(r["evaluation"], r["status"]) for r in shown} == {
                    (r["evaluation"], r["status"]) for r in judge_rows({name: records[name]})
                }
        # Each revision taken over once, its account counted by the replica that finished it.
        logs = [server.log() for server in survivors]
        assert sum(log.count("judge: taking over session") for log in logs) == len(killed)
        assert sum(_evaluated(server) for server in survivors) == len(killed)
    finally:
        codes = [server.stop() for server in survivors]
        downstream.stop()
        fake.stop()
    assert codes == [0, 0]
    span_ids = [
        span.span_id
        for req in downstream.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    assert len(span_ids) == sum(len(r["results"]) + 1 for r in records.values())  # every span, each once
    assert len(set(span_ids)) == len(span_ids)
