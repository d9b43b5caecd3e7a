"""``skillgauge replay`` over real recordings, and over bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from support import FRAMEWORKS, iter_json_lines, trace_requests

from collector.receiver.decode import parse_json


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


def test_a_bad_file_is_named_and_the_rest_still_evaluated(tmp_path: Path) -> None:
    shutil.copy(FRAMEWORKS / "strands" / "right_skill.traces.jsonl", tmp_path / "good.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"resourceSpans": [}\n')
    (tmp_path / "worse.binpb").write_bytes(b"\xff\xff\xffgarbage")
    run = replay(str(tmp_path), "--format", "json")
    assert run.returncode == 1
    assert "bad.jsonl:1" in run.stderr and "worse.binpb" in run.stderr
    sessions = [line["coverage"]["session_id"] for line in iter_json_lines(run.stdout) if "coverage" in line]
    assert sessions == ["strands-right_skill-0001"]


def test_nothing_to_replay_is_an_error(tmp_path: Path) -> None:
    run = replay(str(tmp_path))
    assert run.returncode == 1 and "no OTLP files found" in run.stderr
