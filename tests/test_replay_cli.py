"""``skillgauge replay`` over real recordings, and over bad input."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic, default_verdict, delay, verdict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from support import FRAMEWORKS, iter_json_lines, trace_requests

from collector.component import Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.receiver.decode import parse_json
from collector.replay import _take as take
from collector.replay import requests_in
from collector.service import Chain
from collector.testing import memory_store


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", "replay", *args], capture_output=True, text=True, timeout=120)


def test_json_format_prints_results_then_one_coverage_line_per_session(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("expectations:\n  - when: {user_message: 'release notes'}\n    expect: [release-notes]\n")
    run = replay(str(FRAMEWORKS / "strands"), "--format", "json", "--config", str(config))
    assert run.returncode == 0, run.stderr
    lines = list(iter_json_lines(run.stdout))
    coverage = [line["coverage"] for line in lines if "coverage" in line]
    results = [line for line in lines if "coverage" not in line]
    assert lines[len(results):] == [{"coverage": c} for c in coverage]  # results first
    expected = json.loads((FRAMEWORKS / "strands" / "expected.json").read_text())["scenarios"]
    assert sorted(c["session_id"] for c in coverage) == sorted(s["session_id"] for s in expected.values())
    for c in coverage:
        assert c["revision"] == 1 and c["close_reason"] == "end_of_input"
        assert set(c["catalog"]) == {"state", "skills"}
        for load in c["skill_loads"]:
            assert set(load) == {"skill", "status", "signal", "has_body", "span_id", "trace_id"}
    by_session = {c["session_id"]: c for c in coverage}
    assert by_session["strands-missing_skill-0001"]["expectations"]["missed"] == ["release-notes"]
    assert by_session["strands-right_skill-0001"]["expectations"]["met"] == ["release-notes"]
    invoked = {(r["session_id"], r["reason"], r["passed"]) for r in results if r["evaluation"] == "skill_invoked"}
    # The typo'd load ("relese-notes") is a different skill: release-notes was never invoked.
    assert ("strands-missing_skill-0001", "not_invoked", False) in invoked
    assert ("strands-right_skill-0001", "loaded", True) in invoked
    assert ("strands-no_skill-0001", "not_invoked", False) not in invoked  # 418 question: no rule matched
    for r in results:
        assert (r["passed"] is None) == (r["status"] != "judged")


def test_binary_protobuf_and_logs_files_and_table_format(tmp_path: Path) -> None:
    (req,) = trace_requests(FRAMEWORKS / "claude_code" / "file_read.traces.jsonl")
    (tmp_path / "cc.binpb").write_bytes(req.SerializeToString())
    log_line = (FRAMEWORKS / "claude_code" / "file_read.logs.jsonl").read_text().splitlines()[0]
    logs = parse_json(ExportLogsServiceRequest, log_line.encode())
    (tmp_path / "cc.logs.binpb").write_bytes(logs.SerializeToString())
    run = replay(str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "session " in run.stdout and "claude_code" in run.stdout
    assert run.stdout.count("\nsession ") + run.stdout.startswith("session ") == 1


def test_binary_requests_go_on_with_their_bytes_and_evaluate_as_their_json(tmp_path: Path) -> None:
    """A binary request is handed on with the file's bytes, as a receiver hands a body on
    (spooled as they are, strings read in place); the records are those of the same requests
    as OTLP/JSON."""
    recording = FRAMEWORKS / "deepagents" / "right_skill_langsmith.traces.jsonl"
    for n, request in enumerate(trace_requests(recording)):
        (tmp_path / f"{n:03d}.binpb").write_bytes(request.SerializeToString())
    for path in sorted(tmp_path.iterdir()):
        ((_, received),) = requests_in(path)
        assert isinstance(received, Received) and received.raw == path.read_bytes()
    as_json, as_binary = replay(str(recording), "--format", "json"), replay(str(tmp_path), "--format", "json")
    assert as_json.returncode == 0 and as_binary.returncode == 0, as_json.stderr + as_binary.stderr
    assert len(as_binary.stdout.splitlines()) > 1 and as_binary.stdout == as_json.stdout


def test_a_bad_file_is_named_and_the_rest_still_evaluated(tmp_path: Path) -> None:
    shutil.copy(FRAMEWORKS / "strands" / "right_skill.traces.jsonl", tmp_path / "good.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"resourceSpans": [}\n')
    (tmp_path / "worse.binpb").write_bytes(b"\xff\xff\xffgarbage")
    run = replay(str(tmp_path), "--format", "json")
    assert run.returncode == 1
    assert "bad.jsonl:1" in run.stderr and "worse.binpb" in run.stderr
    sessions = [line["coverage"]["session_id"] for line in iter_json_lines(run.stdout) if "coverage" in line]
    assert sessions == ["strands-right_skill-0001"]


def test_a_reader_that_stops_early_ends_replay_quietly() -> None:
    """``skillgauge replay ... | head -1``: the pipe closes after one line; replay stops with
    the shell's SIGPIPE status and no traceback.  Two frameworks' recordings as JSON are
    ~145 KB, more than twice what a pipe holds (64 KiB), so replay is still writing when the
    pipe closes."""
    folders = [str(FRAMEWORKS / "strands"), str(FRAMEWORKS / "adk")]
    with subprocess.Popen(
        [sys.executable, "-m", "collector", "replay", *folders, "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as run:
        assert run.stdout is not None and run.stderr is not None
        assert run.stdout.readline().startswith(b"{")
        run.stdout.close()  # what head does after its line
        stderr = run.stderr.read().decode()
        assert run.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_nothing_to_replay_is_an_error(tmp_path: Path) -> None:
    run = replay(str(tmp_path))
    assert run.returncode == 1 and "no OTLP files found" in run.stderr


def test_replay_with_the_default_config_judges_omission_where_a_catalog_was_shown_and_no_skill_loaded(
    tmp_path: Path,
) -> None:
    """A newcomer's first run: a judge and nothing else configured.  A recording whose catalog
    was advertised and that loaded no skill, and one whose only load failed (a typo'd name),
    both get a judged skill_omission row, never skipped/sampled_out."""
    fake = FakeAnthropic().start()
    try:
        fake.queue(
            verdict(
                {
                    "reasoning": "The user asked for release notes and the load of relese-notes failed.",
                    "should_have_used_skill": True,
                    "skill": "release-notes",
                },
                evaluation="skill_omission",
            )
        )
        config = tmp_path / "skillgauge.yaml"
        config.write_text(f"judge:\n  base_url: {fake.base_url}\n  api_key: test-key\n")
        run = replay(
            str(FRAMEWORKS / "strands" / "missing_skill.traces.jsonl"),
            str(FRAMEWORKS / "strands" / "no_skill.traces.jsonl"),
            "--format",
            "json",
            "--config",
            str(config),
        )
        assert run.returncode == 0, run.stderr
        lines = list(iter_json_lines(run.stdout))
        omission = {r["session_id"]: r for r in lines if r.get("evaluation") == "skill_omission"}
        coverage = {c["coverage"]["session_id"]: c["coverage"] for c in lines if "coverage" in c}
        assert set(omission) == {"strands-missing_skill-0001", "strands-no_skill-0001"}
        for sid, row in omission.items():
            assert coverage[sid]["catalog"]["state"] == "advertised", sid
            assert row["status"] == "judged", row
            assert row["judge"]["input_tokens"] + row["judge"]["cache_write_tokens"] > 0
        missed = omission["strands-missing_skill-0001"]
        assert (missed["passed"], missed["skill"]) == (False, "release-notes")
        assert missed["reason"] == "skill_omitted"
        assert [s["status"] for s in coverage["strands-missing_skill-0001"]["skill_loads"]] == ["failed"]
        declined = omission["strands-no_skill-0001"]
        assert (declined["passed"], declined["reason"]) == (True, "correctly_declined")
        attempts = {s.blocks()["unsuccessful_skill_loads"] for s in fake.of_kind("skill_omission")}
        assert any(a.startswith("- relese-notes: failed") for a in attempts), attempts
        assert any(a.startswith("(none") for a in attempts), attempts
    finally:
        fake.stop()



async def test_replay_waits_for_room_in_the_judge_queue_instead_of_dropping_a_request() -> None:
    """Past ``judge.max_queue`` the chain refuses requests; replay, a sender in process,
    waits for room as an exporter would retry, and the request is taken."""
    fake = FakeAnthropic().start()
    fake.script = lambda seen: delay(1.0, default_verdict(seen))  # slower than assembly
    config = {
        "judge": {"base_url": fake.base_url, "api_key": "test-key", "max_queue": 1},
        "sessions": {"max_spans": 2},  # the first request's session closes with judge work
    }
    chain = Chain(parse(config), store=memory_store())
    first, second = (
        Received("traces", trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")[0], "test")
        for name in ("right_skill_latest", "multi_turn_latest")
    )
    try:
        await take(chain, first)
        for _ in range(500):  # the closed session reaches the judge queue
            if chain.runner.queued:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(Retryable, match=r"judge\.max_queue 1"):
            await chain.admit()
        await take(chain, second)
        assert second.outcome.accepted > 0 and not second.outcome.rejected
    finally:
        await chain.shutdown(30)
        fake.stop()


async def test_replay_waits_for_assembly_without_logging_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    """With ``sessions.max_pending_requests`` reached, a network sender is refused (and serve
    logs it); replay waits for the queue instead: every request is taken, nothing is logged
    as refused."""
    chain = Chain(parse({"sessions": {"max_pending_requests": 1}}), store=memory_store())
    requests = [
        Received("traces", request, "test")
        for name in ("right_skill_latest", "multi_turn_latest", "no_skill_latest")
        for request in trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
    ]
    try:
        with caplog.at_level("WARNING"):
            for item in requests:
                await take(chain, item)
        assert all(item.outcome.accepted and not item.outcome.rejected for item in requests)
        assert "backpressure" not in caplog.text
    finally:
        await chain.shutdown(30)


def test_an_outcome_is_shown_by_its_counts_not_its_coverages() -> None:
    """``asyncio.run`` formats the finished main task, result included: a replay's outcome
    holds every session's coverage, so it is shown by counts."""
    from collector.replay import ReplayOutcome

    outcome = ReplayOutcome(problems=["a"], notes=["b", "c"])
    assert repr(outcome) == "ReplayOutcome(0 coverages, 1 problems, 2 notes)"


def test_records_do_not_depend_on_how_fast_the_machine_assembles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace request is assembled in slices, the event loop running in between, and a logs
    request at once: replay assembles nothing while it takes requests, so that a logs request
    is never placed between the spans of a trace request half assembled.  The recorded
    ``opencode serve`` run (two sessions in one trace, its log records naming them) splits its
    spans between its sessions the same when every slice ends after one span."""
    import time

    from collector.replay import replay as replay_files

    files = [str(FRAMEWORKS / "opencode" / f"serve.{signal}.jsonl") for signal in ("traces", "logs")]

    def split() -> dict[str, int]:
        outcome = asyncio.run(replay_files(files, parse({})))
        assert not outcome.problems, outcome.problems
        return {c.session.session_id: c.session.span_count for c in outcome.coverages}

    unhurried = split()
    ticks = iter(range(10**9))  # the slices' clock: a second passes at every reading
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    assert split() == unhurried
    assert len(unhurried) == 2 and sum(unhurried.values()) == 1419, unhurried
