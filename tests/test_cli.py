"""The ``skillgauge`` command line: check-config messages, --help, config --defaults,
replay's progress line."""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from support import FRAMEWORKS

from collector.cli import load, main, parser
from collector.config import Config, ConfigError, parse
from collector.progress import ProgressLine
from collector.replay import Progress, replay

# (config text, line, field, what the message must also say: the problem and the fix)
MISTAKES = [
    (
        "sessions:\n  idle_timout: 30s\n",
        2,
        "sessions.idle_timout",
        ["unknown key", "did you mean idle_timeout?"],
    ),
    ("sesions:\n  idle_timeout: 30s\n", 1, "sesions", ["unknown key", "did you mean sessions?"]),
    (
        "evaluators:\n  skill_omision: {enabled: false}\n",
        2,
        "evaluators.skill_omision",
        ["did you mean skill_omission?"],
    ),
    (
        "sessions:\n  idle_timeout: 30s\nmax_open: 10\n",
        3,
        "max_open",
        ["unknown key here", "belongs under sessions: check its indentation"],
    ),
    ("sessions:\n  idle_timeout: 300\n", 2, "sessions.idle_timeout", ["has no unit", "write 300s", "5m"]),
    ("judge:\n  timeout: '60'\n", 2, "judge.timeout", ["has no unit", "write 60s"]),
    ("sessions:\n  max_spans: lots\n", 2, "sessions.max_spans", ["expected a number, got 'lots'"]),
    ("log_level: verbose\n", 1, "log_level", ["'verbose' is not allowed", "use one of 'debug', 'info'"]),
    (
        "evaluators:\n  skill_omission:\n    sampling: 150\n",
        3,
        "evaluators.skill_omission.sampling",
        ["out of range", "at most 100"],
    ),
    (
        "evaluators:\n  skill_omission:\n    enabled: maybe\n",
        3,
        "evaluators.skill_omission.enabled",
        ["expected true or false, got 'maybe'"],
    ),
    ("sessions:\n  keys: span:session.id\n", 2, "sessions.keys", ["expected a list", "[a, b]"]),
    ("status:\n  endpoint: 9464\n", 2, "status.endpoint", ["'9464' is not host:port", "127.0.0.1:9464"]),
    ("judge: claude-sonnet-5-5\n", 1, "judge", ["expected a mapping of keys", "indented key: value"]),
    (
        "receivers:\n  otlp:\n    http: off\n",
        3,
        "receivers.otlp.http",
        ["got false (YAML reads off", "write http: null to turn it off"],
    ),
    (
        "export:\n  otlp:\n    endpoint: http://collector:4317\n    protocol: grcp\n",
        4,
        "export.otlp.protocol",
        ["'grcp' is not allowed - did you mean grpc? use one of 'grpc' or 'http'"],
    ),
    (
        "export:\n  otlp:\n    endpoint: collector:4317\n",
        3,
        "export.otlp.endpoint",
        ["is not a URL", "write http://host:4317"],
    ),
    (
        "judge:\n  model: claude-nova-9\n",
        2,
        "judge.model",
        ["no price for model 'claude-nova-9'", "judge.prices.claude-nova-9:"],
    ),
    (
        "sessions:\n  idle_timeout: 1s\nsessions:\n  max_open: 10\n",
        3,
        "sessions",
        ["appears twice", "keep one"],
    ),
    (
        "evaluators:\n  custom:\n    - name: tone\n      instructions: Rate {tone_of_voice}\n"
        "      rating_scale: [{label: ok, value: 1, definition: d}, {label: bad, value: 0, definition: d}]\n",
        4,
        "evaluators.custom.0.instructions",
        ["unknown placeholder(s) {tone_of_voice}", "use invoked_skill"],
    ),
]


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(["check-config", str(path)])
    except SystemExit as exit:
        code = int(exit.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("text", "line", "field", "says"), MISTAKES, ids=[m[2] for m in MISTAKES])
def test_check_config_names_file_line_field_problem_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, field: str, says: list[str]
) -> None:
    path = tmp_path / "skillgauge.yaml"
    path.write_text(text)
    code, _, err = check(path, capsys)
    assert code == 2
    (message,) = [m for m in err.splitlines() if m.startswith(f"{path}:")]
    assert message.startswith(f"{path}:{line}: {field}: "), message
    for part in says:
        assert part in message
    assert "pydantic" not in err and "Input should" not in err and "type=" not in err


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (
            "sessions:\n  idle_timeout: 30s\n   max_spans: 3\n",
            ":3:13: not valid YAML",
            "mapping values are not allowed",
        ),
        ("sessions:\n\tidle_timeout: 30s\n", ":2:1: not valid YAML", "'\\t'"),
        ("receivers: {otlp: {grpc: null}\n", ":2:1: not valid YAML", "expected ',' or '}'"),
    ],
)
def test_yaml_syntax_errors_name_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str, says: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, _, err = check(path, capsys)
    assert code == 2
    assert f"{path}{where}" in err and says in err and "indentation and quoting" in err


def test_several_problems_are_each_named_in_file_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "skillgauge.yaml"
    path.write_text("log_level: loud\nsessions:\n  max_open: 0\n  idle_timeout: 5\n")
    code, _, err = check(path, capsys)
    lines = [m for m in err.splitlines() if m.startswith(str(path))]
    assert code == 2 and [m.split(": ")[1] for m in lines] == [
        "log_level",
        "sessions.max_open",
        "sessions.idle_timeout",
    ]
    assert [m.split(":")[1] for m in lines] == ["1", "3", "4"]


@pytest.mark.parametrize(
    "text",
    [
        "judge:\n  model: claude-nova-9\n",  # fails: no price, with or without a key
        "judge:\n  api_key: ${env:ANTHROPIC_API_KEY:-}\n  model: claude-nova-9\n",
        "sessions:\n  idle_timeout: 30s\n",  # passes either way
        "judge:\n  api_key: ${env:ANTHROPIC_API_KEY:-}\n",
        "judge:\n  api_key: ${env:ANTHROPIC_API_KEY}\n",  # as in deploy/kubernetes
    ],
)
def test_check_config_does_not_depend_on_the_environment(tmp_path: Path, text: str) -> None:
    path = tmp_path / "skillgauge.yaml"
    path.write_text(text)
    run = [sys.executable, "-m", "collector", "check-config", str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    without = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
    with_key = subprocess.run(
        run, capture_output=True, text=True, env={**env, "ANTHROPIC_API_KEY": "sk-test"}, timeout=60
    )
    assert (without.returncode, without.stderr) == (with_key.returncode, with_key.stderr)
    if "${env:" not in text:  # what the file itself asks from the environment may differ
        assert without.stdout == with_key.stdout
    assert without.returncode == (2 if "nova" in text else 0)


def test_an_unset_variable_is_a_note_for_check_config_and_an_error_for_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SG_SURELY_NOT_SET", raising=False)
    path = tmp_path / "skillgauge.yaml"
    path.write_text("log_level: info\nauth:\n  bearer_token: ${env:SG_SURELY_NOT_SET}\n")
    code, out, err = check(path, capsys)
    assert code == 2  # read as absent, the token is missing: both settings are required
    assert f"note: {path}:3: auth.bearer_token: environment variable SG_SURELY_NOT_SET is not set here" in out
    assert f"{path}:2: auth: set exactly one of bearer_token" in err
    with pytest.raises(ConfigError) as raised:
        load(path)  # what serve reads
    assert str(raised.value) == (
        f"{path}:3: auth.bearer_token: environment variable SG_SURELY_NOT_SET is not set - "
        "export it or write ${env:SG_SURELY_NOT_SET:-default}"
    )


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_subcommand_documents_every_argument(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _subcommands()
    assert set(commands) == {"serve", "replay", "check-config", "config", "recover", "migrate"}
    for name, command in commands.items():
        assert command.description, name
        with pytest.raises(SystemExit):
            main([name, "--help"])
        shown = capsys.readouterr().out
        arguments = [a for a in command._actions if not isinstance(a, argparse._HelpAction)]
        assert arguments, name
        for action in arguments:
            assert action.help and len(action.help) > 15, (name, action.dest)
            assert action.help.split()[0] in shown, (name, action.dest)


def test_config_defaults_is_the_whole_default_configuration_and_valid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "--defaults"]) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(text)
    assert set(data) == set(Config.model_fields)
    assert set(data["evaluators"]) == set(type(Config().evaluators).model_fields)
    assert (
        data["sessions"]["idle_timeout"] == "5m"
        and data["receivers"]["otlp"]["grpc"]["max_request_bytes"] == "16MiB"
    )
    path = tmp_path / "defaults.yaml"
    path.write_text(text)
    code, out, err = check(path, capsys)
    assert (code, err) == (0, "") and "ok" in out
    assert parse(data, anthropic_env=False) == Config()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_progress_line_on_a_terminal_only_after_a_second_and_at_most_four_times_a_second() -> None:
    controller, terminal = pty.openpty()
    with os.fdopen(terminal, "w") as stream:
        clock = Clock()
        line = ProgressLine(stream, clock=clock)
        step = Progress(files_total=1, bytes_total=2_000_000)
        line(step)
        clock.now = 0.9
        line(step)
        assert _read_all(controller) == ""  # under a second: nothing
        clock.now = 1.0
        step.bytes, step.requests, step.sessions = 1_000_000, 10, 3
        line(step)
        clock.now = 1.1
        line(step)  # too soon after the last one
        shown = _read_all(controller)
        assert shown == "\r\x1b[Kreplay: 0/1 files, 1.0/2.0 MB read, 10 requests, 3 sessions"
        clock.now = 1.25
        line(step)
        line.finish()
        assert _read_all(controller).endswith("\r\x1b[K")
    os.close(controller)


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    with (tmp_path / "err").open("w") as stream:
        clock = Clock()
        line = ProgressLine(stream, clock=clock)
        clock.now = 10.0
        line(Progress(files_total=1))
        line.finish()
    assert (tmp_path / "err").read_text() == ""


async def test_replay_reports_files_bytes_requests_and_sessions_as_it_goes() -> None:
    recording = sorted((FRAMEWORKS / "strands").glob("*.jsonl"))[0]
    seen: list[Progress] = []

    def progress(p: Progress) -> None:
        seen.append(Progress(**vars(p)))

    outcome = await replay([str(recording)], parse({}, anthropic_env=False), progress=progress)
    size = recording.stat().st_size
    assert seen[0].files == 0 and seen[0].bytes_total == size and seen[0].requests == 1
    requests = [p.requests for p in seen[:-2]]
    assert requests == list(range(1, len(requests) + 1))  # one call per request, then the file, the end
    assert all(a.bytes <= b.bytes for a, b in itertools.pairwise(seen))
    assert (seen[-2].files, seen[-2].bytes) == (seen[-1].files, seen[-1].bytes) == (1, size)
    assert seen[-1].sessions == len(outcome.coverages) >= 1


def test_replay_command_writes_no_progress_to_a_pipe() -> None:
    recording = sorted((FRAMEWORKS / "strands").glob("*.jsonl"))[0]
    run = subprocess.run(
        [sys.executable, "-m", "collector", "replay", str(recording)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stderr == ""


def test_replay_command_on_a_terminal_shows_progress_and_erases_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real command, its stderr a pseudo-terminal, its progress clock one that moves a
    # second each time it is read (so the line is due at every report).
    recording = sorted((FRAMEWORKS / "strands").glob("*.jsonl"))[0]
    controller, terminal = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal side is closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    ticks = itertools.count()
    monkeypatch.setattr(
        "collector.cli.ProgressLine", functools.partial(ProgressLine, clock=lambda: float(next(ticks)))
    )
    with os.fdopen(terminal, "w") as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        code = main(["replay", str(recording)])
    reader.join(timeout=10)
    os.close(controller)
    text = b"".join(shown).decode()
    assert code == 0 and "session " in capsys.readouterr().out
    assert "\r\x1b[Kreplay: 0/1 files," in text and "sessions" in text and text.endswith("\r\x1b[K")


def _skill(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Does {name}.\n---\n# {name}\n")


def test_an_expectation_naming_an_unknown_skill_is_refused_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = tmp_path / "skills"
    for name in ("release-notes", "csv-cleanup"):
        _skill(skills, name)
    path = tmp_path / "skillgauge.yaml"
    path.write_text(
        f"skills:\n  paths: [{skills}]\nexpectations:\n"
        "  - when: {user_message: release}\n    expect: [release-note]\n"
        "  - when: {user_message: csv}\n    expect: CSV_Cleanup\n"  # names fold: this one is known
    )
    code, _, err = check(path, capsys)
    assert code == 2
    (message,) = [m for m in err.splitlines() if m.startswith(f"{path}:")]
    assert message == (
        f"{path}:5: expectations.0.expect.0: no skill 'release-note' in skills.paths - did you mean "
        "release-notes? (skills there: csv-cleanup, release-notes)"
    )
    path.write_text(path.read_text().replace("release-note]", "release-notes]"))
    assert check(path, capsys)[0] == 0


def test_every_problem_of_a_file_is_reported_in_one_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skills = tmp_path / "skills"
    _skill(skills, "release-notes")
    path = tmp_path / "skillgauge.yaml"
    path.write_text(
        "log_level: loud\n"  # a field
        "sessions:\n  idle_timeout: 5\n"  # a field
        "judge:\n  model: claude-nova-9\n"  # across sections: a model without a price
        f"skills:\n  paths: [{skills}]\n"
        "expectations:\n  - when: {user_message: release}\n    expect: [release-note]\n"  # across: no such skill
    )
    code, _, err = check(path, capsys)
    lines = [m for m in err.splitlines() if m.startswith(f"{path}:")]
    assert code == 2
    assert [(m.split(":")[1], m.split(": ")[1]) for m in lines] == [
        ("1", "log_level"),
        ("3", "sessions.idle_timeout"),
        ("5", "judge.model"),
        ("10", "expectations.0.expect.0"),
    ]
