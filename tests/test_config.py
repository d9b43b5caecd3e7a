from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collector.cli import load
from collector.config import ConfigError, parse


def test_defaults_match_the_design() -> None:
    cfg = parse({})
    assert cfg.receivers.otlp.grpc is not None and cfg.receivers.otlp.grpc.endpoint == "0.0.0.0:4317"
    assert cfg.receivers.otlp.http is not None and cfg.receivers.otlp.http.endpoint == "0.0.0.0:4318"
    assert cfg.status.endpoint == "0.0.0.0:9464"
    assert cfg.storage.path == "./skillgauge-data"
    assert cfg.sessions.keys == (
        "span:session.id",
        "span:gen_ai.conversation.id",
        "span:conversation.id",
        "span:langsmith.metadata.session_id",
        "span:ai.telemetry.metadata.sessionId",
        "span:thread_id",
        "span:thread.id",
        "span:traceloop.association.properties.session_id",
        "resource:session.id",
        "resource:gen_ai.conversation.id",
    )
    assert (cfg.sessions.idle_timeout, cfg.sessions.max_duration, cfg.sessions.max_spans) == (300, 21600, 20000)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"sesions": {}}, "sesions: unknown key"),
        ({"sessions": {"idle_timeout": "5 minutes"}}, "sessions.idle_timeout: '5 minutes' is not a duration"),
        ({"sessions": {"keys": ["session.id"]}}, "must be 'span:<attribute>' or 'resource:<attribute>'"),
        ({"status": {"endpoint": "9464"}}, "status.endpoint: '9464' is not host:port"),
        ({"receivers": {"otlp": {"grpc": {"max_request_bytes": "lots"}}}}, "receivers.otlp.grpc.max_request_bytes"),
        ({"expectations": [{"when": {"user_message": "("}, "expect": "x"}]}, "is not a regular expression"),
        ({"expectations": [{"when": {}, "expect": []}]}, "expectations.0.expect"),
        ([1, 2], "the top level must be a mapping"),
    ],
)
def test_errors_name_the_field_and_the_fix(data: object, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(data)
    assert expected in str(err.value)


def test_env_expansion_and_empty_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SG_IDLE", "15m")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    cfg = parse({"sessions": {"idle_timeout": "${env:SG_IDLE}"}, "judge": {"api_key": "${env:NOPE_NOT_SET:-}"}})
    assert cfg.sessions.idle_timeout == 900
    assert cfg.judge.api_key is None and cfg.judge.base_url == "http://127.0.0.1:1"
    assert "http://127.0.0.1:1" in repr(cfg.judge)
    with pytest.raises(ConfigError, match="environment variable NOPE_NOT_SET is not set"):
        parse({"judge": {"api_key": "${env:NOPE_NOT_SET}"}})


def test_api_key_never_appears_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-123")
    cfg = parse({})
    assert cfg.judge.configured
    assert "sk-secret-123" not in repr(cfg.judge)


def test_check_config_command(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("sessions:\n  idle_timeout: 30s\n")
    bad.write_text("sessions:\n  idle_timout: 30s\n")
    run = [sys.executable, "-m", "collector", "check-config"]
    ok = subprocess.run([*run, str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and "ok" in ok.stdout
    ko = subprocess.run([*run, str(bad)], capture_output=True, text=True)
    assert ko.returncode == 2
    assert "sessions.idle_timout: unknown key" in ko.stderr
    missing = subprocess.run([*run, str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read config file" in missing.stderr
    assert load(good).sessions.idle_timeout == 30
