"""A session closed and evaluated, ``serve`` restarted, then the session continued: revision 2
carries every span of both halves (as if sent at once), revision 1 is still served unchanged.
And a session named only in its log lines' fields is recovered whole after ``kill -9``."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from shared_tables import SharedTables, fresh
from support import FRAMEWORKS, Server, readable_spans, trace_requests, wait_for

from collector.config import parse
from collector.replay import replay

SESSION = "strands-right_skill-0001"


def send(server: Server, spans: list[ReadableSpan]) -> None:
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True)
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def revisions(server: Server, count: int) -> list[dict[str, Any]]:
    """The session's revisions' coverage lines once ``count`` are evaluated."""

    def ready() -> list[Any] | None:
        status, body = server.get_json(f"/v1/sessions/{SESSION}")
        found = body.get("revisions", []) if status == 200 else []
        return found if len(found) >= count and "open" not in body else None

    return [r["records"] for r in wait_for(ready, timeout=30)]


def stop(server: Server) -> None:
    server.proc.send_signal(signal.SIGTERM)
    assert server.stop() == 0


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_session_continued_after_a_restart_is_revision_2_with_every_span(
    tmp_path: Path, how: int, shared: SharedTables, request: pytest.FixtureRequest
) -> None:
    # The reference serve keeps its sessions apart from the split one's (another database).
    other = fresh(shared, request.getfixturevalue("postgres_server").url() if shared.url else None)
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    spans = readable_spans(request)
    (tmp_path / "whole").mkdir()
    (tmp_path / "split").mkdir()

    whole = Server(tmp_path / "whole", other.config())  # the reference: every span at once
    try:
        send(whole, spans)
        ((*_, reference),) = revisions(whole, 1)
    finally:
        stop(whole)
    reference = reference["coverage"]

    srv = Server(tmp_path / "split", shared.config())
    try:
        send(srv, spans[:2])  # the skill load is in this half
        (first,) = revisions(srv, 1)
    finally:
        srv.proc.send_signal(how)
        code = srv.stop()
    assert code == (-signal.SIGKILL if how == signal.SIGKILL else 0)
    assert first[-1]["coverage"]["spans"] == 2

    srv = Server(tmp_path / "split", shared.config())
    try:
        assert revisions(srv, 1) == [first]  # served after the restart, from the store
        send(srv, spans[2:])
        before, second = revisions(srv, 2)
        assert before == first  # not overwritten
        coverage = second[-1]["coverage"]
        assert coverage["revision"] == 2
        assert all(r["revision"] == 2 for r in second[:-1])
        for field in ("spans", "skill_loads", "loads_by_status", "catalog", "framework"):
            assert coverage[field] == reference[field], field
        status, listing = srv.get_json("/v1/sessions")
        assert status == 200
        (row,) = listing["sessions"]
        assert (row["session_id"], row["revision"], row["spans"]) == (SESSION, 2, len(spans))
    finally:
        stop(srv)

    srv = Server(tmp_path / "split", shared.config())  # and once more: both revisions, as they were
    try:
        assert revisions(srv, 2) == [first, second]
    finally:
        stop(srv)


KILO = FRAMEWORKS / "kilo_cli"


def post_json(server: Server, signal_path: str, body: str) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.http_port}/v1/{signal_path}",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


@pytest.mark.parametrize("scenario", ["no_skill", "right_skill"])
def test_a_run_named_in_its_log_lines_fields_is_the_same_session_after_kill_9(
    tmp_path: Path, scenario: str, shared: SharedTables
) -> None:
    # Kilo Code CLI names the session only in its tool spans' attributes and its log lines'
    # fields (no_skill: only the latter).  Restart recovery replays the spool through the
    # same keys: the session comes back whole, as replaying the recording makes it.
    session_id = json.loads((KILO / "expected.json").read_text())["scenarios"][scenario]["session_id"]
    files = [KILO / f"{scenario}.traces.jsonl", KILO / f"{scenario}.logs.jsonl"]
    (reference,) = [
        c.to_dict()
        for c in asyncio.run(replay([str(f) for f in files], parse({}))).coverages
        if c.session.session_id == session_id
    ]

    srv = Server(tmp_path, shared.config({"sessions": {"idle_timeout": "1h"}}))
    try:
        for path in files:
            for line in path.read_text().splitlines():
                post_json(srv, "traces" if path.name.endswith(".traces.jsonl") else "logs", line)
    finally:
        srv.proc.send_signal(signal.SIGKILL)
        assert srv.stop() == -signal.SIGKILL

    srv = Server(tmp_path, shared.config({"sessions": {"idle_timeout": "1s"}}))
    try:

        def evaluated() -> dict[str, Any] | None:
            status, body = srv.get_json(f"/v1/sessions/{session_id}")
            found = body.get("revisions", []) if status == 200 else []
            return found[-1]["records"][-1]["coverage"] if found and "open" not in body else None

        coverage = wait_for(evaluated, timeout=30)
        for field in ("spans", "skill_loads", "loads_by_status", "catalog", "content_capture", "framework"):
            assert coverage[field] == reference[field], field
    finally:
        stop(srv)
