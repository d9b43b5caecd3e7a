"""A judge that is away (answering 529, or refusing connections) delays verdicts; it does not
end them.  Against a real ``skillgauge serve`` with the real ``anthropic`` client and a
fake Messages API on loopback: sessions that close while the judge is away are all judged
once it is back; work still waiting at SIGTERM is finished by the next start, with at most
one verdict per evaluation; work that outwaits ``judge.max_wait`` says so."""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_anthropic import Action, FakeAnthropic, Seen, default_verdict, status
from perf.bench import recorded_session
from shared_tables import SharedTables, Tables
from support import Server, export_grpc, metric_value, reserved_port, wait_for

SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"


class Outage:
    """The fake judge's script: 529 (overloaded) while ``down``, else a verdict; counts both."""

    def __init__(self) -> None:
        self.down = True
        self.verdicts = 0
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, seen: Seen) -> Action:
        with self._lock:
            if self.down:
                self.refused += 1
                return status(529)
            self.verdicts += 1
        return default_verdict(seen)


def judge_away() -> tuple[Outage, FakeAnthropic]:
    """A fake judge answering 529 until its ``Outage`` is set back (``down = False``)."""
    outage = Outage()
    fake = FakeAnthropic().start()
    fake.script = outage
    return outage, fake


def session_request(n: int, name: str) -> bytes:
    return recorded_session(n, name).SerializeToString()


def rows(db: Tables, sql: str) -> list[Any]:
    return db.rows(sql)


def coverage(db: Tables) -> dict[str, dict[str, Any]]:
    return {s: json.loads(r) for s, r in rows(db, "SELECT session, record FROM coverage")}


def config(base_url: str, max_wait: str = "1h") -> dict[str, Any]:
    """``max_wait`` is the default unless a test is about it: however slow a busy machine
    makes the outage, only the judge's return may end the waiting."""
    return {
        "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"},
        "judge": {
            "base_url": base_url,
            "api_key": "test",
            "max_retries": 0,  # each call fails at once: the queue's backoff is what is tested
            "requeue_backoff": "0.2s",
            "requeue_max_backoff": "1s",
            "max_wait": max_wait,
        },
        "skills": {"paths": [str(SKILLS)]},
        "evaluators": {"skill_omission": {"sampling": 100}},
    }


def closed(server: Server) -> float:
    text = server.metrics()
    return sum(
        metric_value(text, "skillgauge_sessions_closed_total", reason=r)
        for r in ("idle_timeout", "end_attribute")
    )


def judge_rows(lines: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    judged = ("skill_selection_accuracy", "skill_instruction_following", "skill_omission")
    return [r for line in lines.values() for r in line["results"] if r["evaluation"] in judged]


def ended_while_away(db: Tables) -> list[dict[str, Any]]:
    """Judge rows that ended (error, skipped) or got a verdict: none may while the judge is away."""
    return [r for r in judge_rows(coverage(db)) if r["status"] in ("error", "skipped") or r["judge"]]


def all_judged(db: Tables, names: list[str]) -> list[dict[str, Any]]:
    """Every session has its coverage line and no judge row ended unjudged; its judge rows."""
    lines = coverage(db)
    assert sorted(lines) == sorted(names)
    judge = judge_rows(lines)
    assert judge and not [r for r in judge if r["status"] in ("error", "skipped")]
    return judge


def test_sessions_closed_while_the_judge_is_away_are_all_judged_when_it_returns(tmp_path: Path, shared: SharedTables) -> None:
    outage, fake = judge_away()
    db = shared.at(tmp_path / "data")
    server = Server(tmp_path, shared.config(config(fake.base_url)))
    names = [f"outage-{n:02d}" for n in range(30)]
    try:
        for n, name in enumerate(names):
            export_grpc(server, session_request(n, name))
        wait_for(lambda: closed(server) >= len(names), timeout=30)  # all closed while the judge is away
        wait_for(
            lambda: (
                metric_value(server.metrics(), "skillgauge_judge_failures_total", reason="overloaded") >= 3
            )
        )
        # Nothing ended for want of a judge: only sessions that need no judge call are done.
        assert not ended_while_away(db)
        # The judge work waiting is written by the store's writer, after the failures counted.
        wait_for(lambda: rows(db, "SELECT COUNT(*) FROM judge_pending")[0][0] > 0)
        outage.down = False
        wait_for(lambda: len(coverage(db)) == len(names), timeout=60, interval=0.2)
        failures = metric_value(server.metrics(), "skillgauge_judge_failures_total", reason="overloaded")
    finally:
        server.stop()
        fake.stop()
    judge = all_judged(db, names)
    assert {(r["status"], r["reason"]) for r in judge if r["status"] != "judged"} <= {
        ("not_applicable", r["reason"]) for r in judge
    }
    assert outage.verdicts == len([r for r in judge if r["judge"] is not None])  # one call per evaluation
    assert rows(db, "SELECT COUNT(*) FROM judge_pending")[0][0] == 0
    warnings = [line for line in server.log().splitlines() if "judge call failed" in line]
    assert warnings and all("WARNING" in line for line in warnings)
    assert len(warnings) < failures  # rate-limited: one line for many failures


def test_work_waiting_at_sigterm_is_finished_by_the_next_start_once(tmp_path: Path, shared: SharedTables) -> None:
    outage, fake = judge_away()
    db = shared.at(tmp_path / "data")
    server = Server(tmp_path, shared.config(config(fake.base_url)))
    names = [f"sigterm-{n:02d}" for n in range(12)]
    try:
        for n, name in enumerate(names[:8]):
            export_grpc(server, session_request(n, name))
        wait_for(lambda: closed(server) >= 8, timeout=30)
        for n, name in enumerate(names[8:], start=8):
            export_grpc(server, session_request(n, name))  # still open at SIGTERM: closed by shutdown
        server.proc.send_signal(signal.SIGTERM)
        assert server.stop() == 0
        first_life = server.log()
        assert "wait in the store" in first_life and "queue_full" not in first_life
        # No row ended as skipped at shutdown: sessions with judge work wait in the store.
        assert not ended_while_away(db)
        waiting = rows(db, "SELECT COUNT(DISTINCT session) FROM judge_pending")[0][0]
        assert waiting and waiting + len(coverage(db)) == len(names)
        outage.down = False
        server = Server(tmp_path, shared.config(config(fake.base_url)))
        wait_for(lambda: len(coverage(db)) == len(names), timeout=60, interval=0.2)
    finally:
        server.stop()
        fake.stop()
    judge = all_judged(db, names)
    assert outage.verdicts == len([r for r in judge if r["judge"] is not None])  # at most one call each
    assert rows(db, "SELECT COUNT(*) FROM judge_pending")[0][0] == 0
    assert "evaluations waited for the judge before the restart" in server.log()


def test_work_that_outwaits_max_wait_is_an_error_that_says_so(tmp_path: Path, shared: SharedTables) -> None:
    refusing = reserved_port()  # bound, not listening: every connection is refused
    try:
        base_url = f"http://127.0.0.1:{refusing.getsockname()[1]}"
        db = shared.at(tmp_path / "data")
        server = Server(tmp_path, shared.config(config(base_url, max_wait="2s")))
        try:
            export_grpc(server, session_request(0, "never-judged"))
            wait_for(lambda: "never-judged" in coverage(db), timeout=30, interval=0.2)
            metrics = server.metrics()
        finally:
            server.stop()
    finally:
        refusing.close()
    (line,) = coverage(db).values()
    judge = judge_rows({"never-judged": line})
    waited = [r for r in judge if r["status"] == "error"]
    assert waited and {r["reason"] for r in waited} == {"judge_unreachable_timeout"}
    assert all("judge.max_wait 2s" in r["explanation"] for r in waited)
    assert metric_value(metrics, "skillgauge_judge_failures_total", reason="error") >= 1


def bounded_config(base_url: str) -> dict[str, Any]:
    """``config`` with room for 2 judge evaluations (``judge.max_queue``)."""
    cfg = config(base_url)
    cfg["judge"]["max_queue"] = 2
    return cfg


def taken_once_the_judge_is_back(server: Server, outage: Outage, db: Tables, body: bytes, names: list[str]) -> None:
    """The judge returns, its queue drains, and the sender's retry of ``body`` is taken: every
    session of ``names`` gets its coverage line."""
    outage.down = False
    wait_for(lambda: metric_value(server.metrics(), "skillgauge_judge_queue_depth") == 0, timeout=60)
    export_grpc(server, body)
    wait_for(lambda: len(coverage(db)) == len(names), timeout=60, interval=0.2)


def send_until_refused(server: Server, prefix: str) -> tuple[list[str], tuple[str, bytes]]:
    """Sessions one by one, each closed before the next, until one is refused because
    ``judge.max_queue`` (2) evaluations wait: the names taken, and the refused one with its
    request."""
    taken: list[str] = []
    for n in range(40):
        name = f"{prefix}-{n:02d}"
        body = session_request(n, name)
        try:
            export_grpc(server, body)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE
            assert "judge.max_queue 2" in (err.details() or "")
            assert taken, "refused before any judge work waited"
            return taken, (name, body)
        taken.append(name)
        wait_for(lambda: closed(server) >= len(taken), timeout=30)  # its work is queued now
    raise AssertionError("intake was never refused")


def test_while_the_judge_is_away_intake_stops_at_max_queue_and_resumes_once_it_drains(tmp_path: Path, shared: SharedTables) -> None:
    """Waiting judge work holds its sessions in memory, so it bounds intake: at
    ``judge.max_queue`` waiting evaluations new requests get backpressure (gRPC UNAVAILABLE,
    HTTP 503 with Retry-After), nothing taken is dropped, and the judge's return lets the
    refused request in."""
    outage, fake = judge_away()
    db = shared.at(tmp_path / "data")
    cfg = bounded_config(fake.base_url)
    server = Server(tmp_path, shared.config(cfg))
    try:
        taken, refused = send_until_refused(server, "bounded")
        depth = metric_value(server.metrics(), "skillgauge_judge_queue_depth")
        assert depth >= 2
        request = urllib.request.Request(
            f"{server.http_url}/v1/traces",
            data=refused[1],
            headers={"Content-Type": "application/x-protobuf"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=10)
        assert answer.value.code == 503 and int(answer.value.headers["Retry-After"]) >= 1
        text = server.metrics()
        for protocol in ("grpc", "http"):
            assert metric_value(text, "skillgauge_rejected_requests_total", protocol=protocol, reason="backpressure") == 1
        assert not ended_while_away(db)
        names = [*taken, refused[0]]
        taken_once_the_judge_is_back(server, outage, db, refused[1], names)
    finally:
        server.stop()
        fake.stop()
    all_judged(db, names)
    assert "requests refused with backpressure: " in server.log() and "judge.max_queue 2" in server.log()


def test_judge_work_recovered_at_a_restart_still_bounds_intake(tmp_path: Path, shared: SharedTables) -> None:
    """Work that waits in the store at SIGTERM is queued again by the next start, and counts
    against ``judge.max_queue`` there too, until the judge is back."""
    outage, fake = judge_away()
    db = shared.at(tmp_path / "data")
    cfg = bounded_config(fake.base_url)
    server = Server(tmp_path, shared.config(cfg))
    try:
        taken, (name, body) = send_until_refused(server, "restarted")
        server.proc.send_signal(signal.SIGTERM)
        assert server.stop() == 0
        server = Server(tmp_path, shared.config(cfg))  # the judge is still away
        with pytest.raises(grpc.RpcError) as refused:
            export_grpc(server, body)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "judge.max_queue 2" in (refused.value.details() or "")
        names = [*taken, name]
        taken_once_the_judge_is_back(server, outage, db, body, names)
    finally:
        server.stop()
        fake.stop()
    all_judged(db, names)
