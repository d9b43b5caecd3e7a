"""The judge on Bedrock and Vertex AI: the SDK's real ``AsyncAnthropicBedrock`` and
``AsyncAnthropicVertex`` clients, with real boto3 SigV4 signing and a real google-auth
service-account token exchange, against the fake's Bedrock, Vertex and OAuth routes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic.lib.aws._auth as aws_auth
import pytest
from fake_anthropic import FakeAnthropic, status, verdict
from judge_support import Collected, config, load, only, session

from collector.config import ConfigError, parse
from collector.evaluate.models import JUDGE_MODELS, JudgeModel
from collector.evaluate.prices import list_price
from evaluators.result import EvaluationResult

REGION = "eu-west-1"
AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic(aws_region=REGION).start()
    yield server
    server.stop()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, fake: FakeAnthropic) -> None:
    """Static keys in the environment, and nothing else boto3 could find on this machine."""
    for var in AWS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", fake.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # The SDK keeps one boto3 session per set of client arguments for the process; each test
    # sets its own environment, so each starts without one.
    aws_auth._get_session.cache_clear()


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch, fake: FakeAnthropic, tmp_path: Path) -> Path:
    key = fake.service_account(tmp_path / "service-account.json", project="fake-project")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    return key


def bedrock(fake: FakeAnthropic, **judge: object) -> Collected:
    return Collected(
        config(provider="bedrock", aws_region=REGION, base_url=fake.base_url, backoff="10ms", **judge)
    )


def vertex(fake: FakeAnthropic, region: str = "us-east5", **judge: object) -> Collected:
    cfg = config(
        provider="vertex",
        project_id="fake-project",
        region=region,
        base_url=f"{fake.base_url}/v1",
        backoff="10ms",
        **judge,
    )
    return Collected(cfg)


def omitted(skill: str = "release-notes") -> object:
    return verdict(
        {"reasoning": "The user asked for release notes.", "should_have_used_skill": True, "skill": skill},
        evaluation="skill_omission",
    )


def assert_cost_is_the_list_price(row: EvaluationResult, provider: str, region: str | None = None) -> None:
    usage = row.judge
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0
    price = list_price(provider, usage.model, region)  # type: ignore[arg-type]
    assert price is not None
    expected = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.input * 0.1
        + usage.cache_write_tokens * price.input * 1.25
    ) / 1_000_000
    assert usage.cost_usd == pytest.approx(expected, rel=1e-6)


async def run(c: Collected, *sessions: object) -> None:
    try:
        await c.run(*sessions)  # type: ignore[arg-type]
    finally:
        await c.runner.close()


async def test_bedrock_judges_through_sigv4_signed_invoke_calls(fake: FakeAnthropic, aws: None) -> None:
    fake.queue(omitted())
    c = bedrock(fake)
    await run(c, session("loaded", loads=[load()]), session("skipped-skill"))
    selection = only(c.of("loaded").results, "skill_selection_accuracy")
    assert (selection.status, selection.passed, selection.explanation) == (
        "judged",
        True,
        "The skill matches the request.",
    )
    omission = only(c.of("skipped-skill").results, "skill_omission")
    assert (omission.status, omission.passed, omission.skill, omission.explanation) == (
        "judged",
        False,
        "release-notes",
        "The user asked for release notes.",
    )
    for row in (selection, omission):
        assert row.judge is not None and row.judge.model == "global.anthropic.claude-sonnet-5-5"
        assert_cost_is_the_list_price(row, "bedrock")
    calls = fake.of_route("bedrock")
    assert len(calls) == 3 and not [s.rejected for s in calls if s.rejected]
    for seen in calls:
        assert seen.path == "/model/global.anthropic.claude-sonnet-5-5/invoke"
        assert "model" not in seen.wire and seen.wire["anthropic_version"] == "bedrock-2023-05-31"
        assert (
            seen.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={fake.access_key}/")
            and f"/{REGION}/bedrock/aws4_request" in seen.headers["authorization"]
        )
        assert "tool_choice" not in seen.wire and seen.wire["thinking"] == {"type": "between_tools"}
        assert seen.wire["output_config"]["format"]["type"] == "json_schema"


async def test_bedrock_signed_for_another_region_is_an_error_row_and_not_retried(
    fake: FakeAnthropic, aws: None
) -> None:
    c = Collected(config(provider="bedrock", aws_region="us-east-1", base_url=fake.base_url, backoff="10ms"))
    await run(c, session())
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.reason, row.passed) == ("error", "judge_error", None)
    assert "HTTP 403" in row.explanation and "signed for bedrock in us-east-1" in row.explanation
    (seen,) = fake.of_route("bedrock")  # a 403 is final
    assert seen.rejected


async def test_bedrock_throttling_is_retried_and_5xx_waits_for_the_judge(
    fake: FakeAnthropic, aws: None
) -> None:
    fake.queue(status(429, retry_after=0, evaluation="skill_omission"))
    c = bedrock(fake)
    await run(c, session("throttled"))
    assert only(c.rows(), "skill_omission").status == "judged"
    # Three 500s use up the client's retries; the work waits (it is not ended) and the
    # next call, answered, gives the verdict.
    fake.queue(*(status(500, message="internal failure", evaluation="skill_omission") for _ in range(3)))
    c = bedrock(fake, max_retries=2, requeue_backoff="10ms")
    await run(c, session("broken"))
    assert only(c.rows(), "skill_omission").status == "judged"
    assert len(fake.of_route("bedrock")) == 6


async def test_bedrock_without_credentials_says_so_on_the_row(
    fake: FakeAnthropic, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    c = bedrock(fake)
    await run(c, session())
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.reason, row.passed) == ("error", "judge_error", None)
    assert "the bedrock client could not send the request" in row.explanation
    assert "credentials" in row.explanation.lower()
    assert fake.of_route("bedrock") == []


async def test_vertex_judges_with_a_token_from_a_service_account_exchange(
    fake: FakeAnthropic, google: Path
) -> None:
    fake.queue(omitted())
    c = vertex(fake)
    await run(c, session("loaded", loads=[load()]), session("skipped-skill"))
    following = only(c.of("loaded").results, "skill_instruction_following")
    assert (following.status, following.label, following.passed) == ("judged", "Fully Followed", True)
    assert following.explanation.startswith("Each step is visible in the answer.")
    omission = only(c.of("skipped-skill").results, "skill_omission")
    assert (omission.status, omission.passed, omission.skill) == ("judged", False, "release-notes")
    assert omission.explanation == "The user asked for release notes."
    for row in (following, omission):
        assert row.judge is not None and row.judge.model == "claude-sonnet-5-5"
        assert_cost_is_the_list_price(row, "vertex", "us-east5")
    # us-east5 is a regional endpoint: 10 % over the global price
    regional, global_ = (
        list_price("vertex", "claude-sonnet-5-5", "us-east5"),
        list_price("vertex", "claude-sonnet-5-5", "global"),
    )
    assert (
        regional is not None and global_ is not None and regional.input == pytest.approx(global_.input * 1.1)
    )
    assert fake.token_requests and all(t["problem"] == "" for t in fake.token_requests)
    assert {t["iss"] for t in fake.token_requests} == {"judge@fake-project.iam.gserviceaccount.com"}
    calls = fake.of_route("vertex")
    assert len(calls) == 3 and not [s.rejected for s in calls if s.rejected]
    for seen in calls:
        assert seen.path == (
            "/v1/projects/fake-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-5-5:rawPredict"
        )
        assert "model" not in seen.wire and seen.wire["anthropic_version"] == "vertex-2023-10-16"
        assert seen.headers["authorization"].startswith("Bearer ya29.fake-")


async def test_vertex_with_a_key_the_token_endpoint_rejects_is_an_error_row(
    fake: FakeAnthropic, google: Path, tmp_path: Path
) -> None:
    stale = google.read_text()
    fake.service_account(tmp_path / "rotated.json")  # the fake now trusts another key only
    google.write_text(stale)
    c = vertex(fake)
    await run(c, session())
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.reason, row.passed) == ("error", "judge_error", None)
    assert "the vertex client could not send the request: RefreshError" in row.explanation
    assert fake.token_requests and fake.token_requests[-1]["problem"] == "bad signature"
    assert fake.of_route("vertex") == []


async def test_vertex_server_errors_wait_until_max_wait_then_end_as_an_error_row(
    fake: FakeAnthropic, google: Path
) -> None:
    fake.queue(*(status(503, message="backend unavailable", evaluation="skill_omission") for _ in range(200)))
    c = vertex(fake, region="global", max_retries=1, max_wait="200ms", requeue_backoff="10ms")
    await run(c, session())
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.reason) == ("error", "judge_unreachable_timeout")
    assert "HTTP 503" in row.explanation
    calls = fake.of_route("vertex")
    assert len(calls) >= 2 and {s.path.split("/")[5] for s in calls} == {"global"}


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (
            {"provider": "bedrock", "aws_region": "us-east-1", "model": "claude-sonnet-5-5"},
            "is not a Bedrock model id",
        ),
        (
            {
                "provider": "vertex",
                "project_id": "p",
                "region": "global",
                "model": "anthropic.claude-sonnet-5-5",
            },
            "is not a Vertex AI model id",
        ),
        ({"model": "us.anthropic.claude-sonnet-5-5"}, "set judge.provider: bedrock"),
        ({"model": "claude-sonnet-4-5@20250929"}, "set judge.provider: vertex"),
        ({"provider": "bedrock"}, "aws_region: provider bedrock needs a region - set judge.aws_region"),
        (
            {"provider": "vertex", "region": "global"},
            "project_id: provider vertex needs a Google Cloud project",
        ),
        ({"provider": "vertex", "project_id": "p"}, "region: provider vertex needs a region"),
        (
            {"provider": "bedrock", "aws_region": "us-east-1", "api_key": "k"},
            "api_key is for provider anthropic",
        ),
        ({"aws_region": "us-east-1"}, "aws_region is a setting of provider bedrock, not anthropic"),
        (
            {
                "provider": "bedrock",
                "aws_region": "us-east-1",
                "model": "arn:aws:bedrock:us-east-1:1:application-inference-profile/x",
            },
            "judge.model: no price for model",
        ),
    ],
)
def test_provider_mistakes_name_the_field_and_the_fix(
    judge: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "CLOUD_ML_REGION",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "GOOGLE_CLOUD_PROJECT",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError) as err:
        parse({"judge": judge})
    assert message in str(err.value)


def test_defaults_per_provider_and_region_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-northeast-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-bedrock")
    cfg = parse({"judge": {"provider": "bedrock"}})
    assert (cfg.judge.aws_region, cfg.judge.model, cfg.judge.api_key) == (
        "ap-northeast-1",
        "global.anthropic.claude-sonnet-5-5",
        None,
    )
    assert cfg.judge.configured  # credentials are the AWS chain's, resolved per call
    monkeypatch.setenv("CLOUD_ML_REGION", "europe-west1")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    cfg = parse({"judge": {"provider": "vertex"}})
    assert (cfg.judge.region, cfg.judge.project_id, cfg.judge.model) == (
        "europe-west1",
        "my-project",
        "claude-sonnet-5-5",
    )
    regional = cfg.judge.price("claude-sonnet-5-5")
    assert (
        regional is not None
        and regional.input == pytest.approx(2.2)
        and regional.output == pytest.approx(11.0)
    )
    # a geographic Bedrock profile is regional, the global one is not; older models have one price
    assert list_price("bedrock", "us.anthropic.claude-sonnet-5-5").input == pytest.approx(2.2)  # type: ignore[union-attr]
    assert list_price("bedrock", "global.anthropic.claude-sonnet-5-5").input == 2.0  # type: ignore[union-attr]
    assert list_price("bedrock", "anthropic.claude-sonnet-4-20250514-v1:0").input == 3.0  # type: ignore[union-attr]
    assert list_price("vertex", "claude-opus-4-1@20250805", "us-east5").output == 75.0  # type: ignore[union-attr]


async def test_a_forced_tool_request_for_sonnet_5_5_is_refused_on_every_provider(
    fake: FakeAnthropic, aws: None, google: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's old request (a forced verdict tool) for the default model: each platform's
    route answers 400, the row says why, and nothing is retried."""
    monkeypatch.setitem(JUDGE_MODELS, "claude-sonnet-5-5", JudgeModel(verdict="tool"))
    claude = Collected(config(api_key="k", base_url=fake.base_url, backoff="10ms"))
    for route, c in (("anthropic", claude), ("bedrock", bedrock(fake)), ("vertex", vertex(fake))):
        await run(c, session(f"s-{route}"))
        row = only(c.rows(), "skill_omission")
        assert (row.status, row.reason) == ("error", "judge_error"), route
        assert "HTTP 400" in row.explanation and "forced tool use" in row.explanation, route
        (seen,) = fake.of_route(route)
        assert "forced tool use" in seen.rejected and seen.wire["tool_choice"]["type"] == "tool"
