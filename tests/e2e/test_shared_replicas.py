"""Replicas of ``skillgauge serve`` sharing one PostgreSQL (``storage.shared``), started for
this module: every replica's ``/v1/sessions``, session pages and ``/ui/sessions`` answer for
the sessions of all three; a replica killed with SIGKILL while its exports wait on a
downstream outage leaves them to another, which sends each span once after the lease; every
replica's ``?state=open`` lists the open sessions of all three, naming the replica holding
each, until one dies and its beat lapses."""

from __future__ import annotations

import json
import signal
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from export.downstream import Downstream
from perf.bench import recorded_session
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server
from support import Server, export_grpc, wait_for


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _shared(url: str, **extra: Any) -> dict[str, Any]:
    return {"storage": {"shared": url, "lease": "1s"}, "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"}, **extra}


def _listed(server: Server) -> set[str]:
    status, body = server.get_json("/v1/sessions?limit=500")
    assert status == 200, body
    return {row["session_id"] for row in body["sessions"]}


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url) as db:
        row = db.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_every_replica_lists_every_replicas_sessions(postgres_server: Postgres, tmp_path: Path) -> None:  # noqa: F811
    url = postgres_server.url()
    replicas = [Server(_dir(tmp_path / f"r{n}"), _shared(url)) for n in range(3)]
    try:
        sent: dict[str, int] = {}
        for n in range(6):  # two sessions a replica, each session sent to one replica only
            name = f"shared-{n}"
            export_grpc(replicas[n % 3], recorded_session(n, name).SerializeToString())
            sent[name] = n % 3
        for server in replicas:
            wait_for(lambda server=server: _listed(server) == set(sent), timeout=30, interval=0.2)  # type: ignore[misc]
        for name in sent:  # a session's detail and page answer on every replica
            for server in replicas:
                status, body = server.get_json(f"/v1/sessions/{urllib.parse.quote(name)}")
                assert status == 200 and body, (name, body)
        for server in replicas:
            with server._open("/ui/sessions", 10) as resp:
                page = resp.read().decode()
            assert all(name in page for name in sent)
    finally:
        codes = [server.stop() for server in replicas]
    assert codes == [0, 0, 0]


def test_a_killed_replicas_exports_are_sent_once_by_another(postgres_server: Postgres, tmp_path: Path) -> None:  # noqa: F811
    url = postgres_server.url()
    downstream = Downstream("grpc", fail_first=10**9)  # down until the test says otherwise
    export = {"otlp": {"endpoint": downstream.endpoint, "protocol": "grpc",
                       "retry": {"initial_interval": "0.1s", "max_interval": "0.3s"}}}
    a = Server(_dir(tmp_path / "a"), _shared(url, export=export))
    b = Server(_dir(tmp_path / "b"), _shared(url, export=export))
    try:
        for n in range(3):
            export_grpc(a, recorded_session(n, f"killed-{n}").SerializeToString())
        # Evaluated, its spans waiting in the outbox, leased to a (which keeps trying).
        wait_for(lambda: _count(url, "SELECT COUNT(*) FROM coverage") == 3, timeout=30, interval=0.2)
        with psycopg.connect(url) as db:  # a span per result and one per coverage line
            records = [json.loads(r) for (r,) in db.execute("SELECT record FROM coverage").fetchall()]
        waiting = sum(len(r["results"]) + 1 for r in records)
        wait_for(
            lambda: _count(url, "SELECT COUNT(*) FROM outbox WHERE lease_owner IS NOT NULL") == waiting,
            timeout=30,
            interval=0.2,
        )
        assert downstream.traces == []
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        downstream.fail_first = 0  # the downstream is back; a is not
        wait_for(lambda: _count(url, "SELECT COUNT(*) FROM outbox") == 0, timeout=30, interval=0.2)
    finally:
        code = b.stop()
        downstream.stop()
    assert code == 0
    span_ids = [span.span_id for req in downstream.traces for rs in req.resource_spans
                for ss in rs.scope_spans for span in ss.spans]
    assert len(span_ids) == waiting  # every span that waited, each once
    assert len(set(span_ids)) == len(span_ids)


def _open(server: Server) -> dict[str, str]:
    """``?state=open`` on ``server``: each listed session's id -> the replica holding it."""
    status, body = server.get_json("/v1/sessions?state=open&limit=500")
    assert status == 200, body
    return {row["session_id"]: row["replica"] for row in body["sessions"]}


def test_every_replica_lists_every_replicas_open_sessions_until_one_dies(
    postgres_server: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = postgres_server.url()
    config = {
        "storage": {"shared": url, "lease": "1s"},
        "sessions": {"idle_timeout": "1h", "check_interval": "0.1s"},
    }
    replicas = [Server(_dir(tmp_path / f"r{n}"), config) for n in range(3)]
    try:
        for n in range(6):  # two sessions a replica, each held open by one replica only
            export_grpc(replicas[n % 3], recorded_session(n, f"open-{n}").SerializeToString())
        held = {f"open-{n}": n % 3 for n in range(6)}
        replica_of: dict[int, str] = {}  # the name each replica gives itself in its listing
        for n, server in enumerate(replicas):
            own = {s for s, r in held.items() if r == n}
            listed = wait_for(
                lambda server=server, own=own: _open(server) if own <= _open(server).keys() else None,
                timeout=30,
                interval=0.2,
            )  # type: ignore[misc]
            replica_of[n] = listed[min(own)]
        assert len(set(replica_of.values())) == 3
        expected = {s: replica_of[n] for s, n in held.items()}
        for server in replicas:  # every replica lists all six, each naming its replica
            wait_for(lambda server=server: _open(server) == expected, timeout=30, interval=0.2)  # type: ignore[misc]
        replicas[0].proc.send_signal(signal.SIGKILL)
        replicas[0].proc.wait()
        alive = {s: r for s, r in expected.items() if held[s] != 0}
        for server in replicas[1:]:  # the dead replica's stop counting once its beat lapses
            wait_for(lambda server=server: _open(server) == alive, timeout=30, interval=0.2)  # type: ignore[misc]
    finally:
        codes = [server.stop() for server in replicas[1:]]
    assert codes == [0, 0]
