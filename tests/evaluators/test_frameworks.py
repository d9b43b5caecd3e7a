"""One recorded session per framework, replayed against the fake Anthropic API: the rows of
all four evaluators, with tokens and cost on every judged row; and, over every recording,
a coverage account that adds up."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropic
from support import FRAMEWORKS

from collector.config import Config, parse
from collector.replay import replay
from evaluators import context

SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"
# framework -> the scenario replayed; each asks for release notes and loads release-notes.
SCENARIOS = {
    "strands": "right_skill",
    "adk": "right_skill_content",
    "deepagents": "right_skill_langsmith",
    "openai_agents": "right_skill",
    "claude_code": "right_skill",
    "codex_cli": "right_skill_content",  # logs only; the prompt needs log_user_prompt
    "gemini_cli": "right_skill",  # default telemetry: logs carry the prompts
}
# Sessions of the newer harnesses that loaded no skill, replayed with the default config and
# the fake judge: skill_omission is judged (against the trace's catalog, or the registry's
# when the harness records none, as the Codex CLI does).
NO_LOAD = [
    ("gemini_cli", "no_skill"),
    ("codex_cli", "no_skill_content"),
    ("codex_cli", "missing_mention_content"),
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


def _config(fake: FakeAnthropic) -> dict[str, Any]:
    return {
        "judge": {"base_url": fake.base_url, "api_key": "test-key"},
        "skills": {"paths": [str(SKILLS)]},
        "expectations": [{"when": {"user_message": "(?i)release notes"}, "expect": ["release-notes"]}],
    }


def _scenario(framework: str, name: str) -> dict[str, Any]:
    expected = json.loads((FRAMEWORKS / framework / "expected.json").read_text())
    return dict(expected["scenarios"][name])


@pytest.mark.parametrize("framework", sorted(SCENARIOS))
async def test_one_session_per_framework_yields_all_four_evaluators(
    framework: str, fake: FakeAnthropic
) -> None:
    scenario = _scenario(framework, SCENARIOS[framework])
    outcome = await replay([str(FRAMEWORKS / framework / f) for f in scenario["files"]], parse(_config(fake)))
    assert not outcome.problems
    (coverage,) = [c for c in outcome.coverages if c.session.session_id == scenario["session_id"]]
    rows = {r.evaluation: r for r in coverage.results}
    assert sorted(rows) == sorted(
        ["skill_invoked", "skill_selection_accuracy", "skill_instruction_following", "skill_omission"]
    ), [(r.evaluation, r.status, r.reason) for r in coverage.results]
    (expected_load,) = scenario["loads"]
    catalog_source = "trace" if scenario["catalog"]["state"] != "not_recorded" else "registry"
    body_source = "trace" if expected_load["has_body"] else "registry"
    got = {
        name: (r.status, r.reason, r.score, r.passed, r.skill, r.body_source, r.catalog_source)
        for name, r in rows.items()
    }
    assert got == {
        "skill_invoked": ("judged", "loaded", 1.0, True, "release-notes", None, None),
        "skill_selection_accuracy": ("judged", "yes", 1.0, True, "release-notes", None, catalog_source),
        "skill_instruction_following": (
            "judged",
            "fully_followed",
            1.0,
            True,
            "release-notes",
            body_source,
            None,
        ),
        "skill_omission": ("not_applicable", "skill_loaded", None, None, None, None, catalog_source),
    }
    for name in ("skill_selection_accuracy", "skill_instruction_following"):
        usage = rows[name].judge
        assert usage is not None and usage.model == "claude-sonnet-5-5"
        assert usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens > 0
        assert usage.output_tokens > 0 and usage.cost_usd is not None and usage.cost_usd > 0
    assert rows["skill_invoked"].judge is None and rows["skill_omission"].judge is None
    # the judge saw the registry's steps when the trace had no body
    following = [s for s in fake.of_kind("skill_instruction_following") if s.skill == "release-notes"]
    assert "Put breaking changes first" in following[-1].blocks()["skill_content"]
    assert coverage.to_dict()["accounting"]["adds_up"] is True


@pytest.mark.parametrize(("framework", "name"), NO_LOAD)
async def test_a_session_of_a_new_harness_that_loaded_no_skill_has_omission_judged(
    framework: str, name: str, fake: FakeAnthropic
) -> None:
    scenario = _scenario(framework, name)
    assert scenario["loads"] == []
    config = {k: v for k, v in _config(fake).items() if k != "expectations"}
    outcome = await replay([str(FRAMEWORKS / framework / f) for f in scenario["files"]], parse(config))
    (coverage,) = [c for c in outcome.coverages if c.session.session_id == scenario["session_id"]]
    (omission,) = [r for r in coverage.results if r.evaluation == "skill_omission"]
    assert omission.status == "judged", (omission.status, omission.reason, omission.explanation)
    assert omission.catalog_source == ("trace" if scenario["catalog"]["state"] == "advertised" else "registry")
    assert omission.judge is not None and omission.judge.cost_usd


def _all_recordings() -> list[tuple[str, str, list[str]]]:
    out = []
    for expected in sorted(FRAMEWORKS.glob("*/expected.json")):
        for name, scenario in json.loads(expected.read_text())["scenarios"].items():
            out.append((expected.parent.name, name, [str(expected.parent / f) for f in scenario["files"]]))
    return out


async def test_coverage_adds_up_for_every_recording(fake: FakeAnthropic) -> None:
    cfg = parse(_config(fake))
    sessions = 0
    for framework, name, files in _all_recordings():
        outcome = await replay(files, cfg)
        for coverage in outcome.coverages:
            sessions += 1
            s, results = coverage.session, coverage.results
            where = f"{framework}/{name}"
            selection = [r for r in results if r.evaluation == "skill_selection_accuracy"]
            following = [r for r in results if r.evaluation == "skill_instruction_following"]
            omission = [r for r in results if r.evaluation == "skill_omission"]
            # every skill load: exactly one selection row, anchored to that load's span
            assert sorted(r.span_id or "" for r in selection) == sorted(
                load.span_id for load in s.skill_loads
            ), where
            # every distinct skill loaded: exactly one following row
            assert len(following) == len({load.key for load in s.skill_loads}), where
            # every session: exactly one omission decision
            assert len(omission) == 1, where
            for r in results:
                assert (r.passed is None) == (r.status != "judged"), (where, r)
                if r.status == "judged" and r.evaluation != "skill_invoked":
                    assert r.judge is not None and r.judge.cost_usd, (where, r)
            summary = coverage.to_dict()
            assert summary["accounting"]["adds_up"], (where, summary["accounting"])
            assert sum(summary["results_by_status"].values()) == len(results)
            assert summary["judge"]["rows"] == sum(1 for r in results if r.judge is not None)
    assert sessions >= 60


def test_cli_replay_json_against_the_fake_judge(tmp_path: Path, fake: FakeAnthropic) -> None:
    config_path = tmp_path / "skillgauge.yaml"
    config_path.write_text(json.dumps(_config(fake)))  # JSON is YAML
    env = {"PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector",
            "replay",
            "--config",
            str(config_path),
            "--format",
            "json",
            str(FRAMEWORKS / "strands" / "multi_turn.traces.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    rows = [line for line in lines if "coverage" not in line]
    (coverage,) = [line["coverage"] for line in lines if "coverage" in line]
    judged = [r for r in rows if r["status"] == "judged" and r["evaluation"] != "skill_invoked"]
    assert len(judged) == 4  # two loads: two selections, two followings
    for row in judged:
        assert (
            row["judge"]["input_tokens"]
            + row["judge"]["cache_read_tokens"]
            + row["judge"]["cache_write_tokens"]
            > 0
        )
        assert row["judge"]["cost_usd"] > 0
    assert coverage["accounting"]["adds_up"] is True
    assert coverage["judge"]["cost_usd"] == pytest.approx(sum(r["judge"]["cost_usd"] for r in judged))


def test_config_points_at_the_fake(fake: FakeAnthropic) -> None:
    cfg: Config = parse(_config(fake))
    assert cfg.judge.configured and cfg.judge.base_url == fake.base_url


async def test_has_context_before_agrees_with_the_rendered_trajectory() -> None:
    # skill_selection decides "no trajectory" without rendering the text; both must agree
    # at every instant that matters: each load, and just before, at and after each turn and call.
    checked = 0
    for _, _, files in _all_recordings():
        for coverage in (await replay(files, parse({}))).coverages:
            s = coverage.session
            times = [context.load_time(s, load) for load in s.skill_loads]
            for t in [t.start_unix_nano for t in s.turns] + [c.start_unix_nano for c in s.tool_calls]:
                times += [t - 1, t, t + 1]
            for at in times:
                assert context.has_context_before(s, at) == bool(context.trajectory(s, at)), (
                    s.session_id,
                    at,
                )
                checked += 1
    assert checked > 300
