"""Evaluation config: the judge (model, prices, budgets, retries), the skills registry, and
each evaluator's policy."""

from __future__ import annotations

import re
from typing import Any, Literal, Protocol

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from collector.configtypes import Seconds, Strict, read_secret
from collector.evaluate.prices import DEFAULT_MODELS, Provider, list_price, model_problem


class Price(Strict):
    """US dollars per million tokens.  Cache prices default to the API's multipliers of ``input``."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)  # default 0.1 x input
    cache_write: float | None = Field(default=None, ge=0)  # default 1.25 x input (5-minute cache)


DEFAULT_USD_PER_DAY = 50.0  # judge.budget.usd_per_day unless configured; null removes it


class Budget(Strict):
    """Hard ceilings on judge spend.  Windows are calendar hours and days (UTC)."""

    tokens_per_hour: int | None = Field(default=None, gt=0)
    tokens_per_day: int | None = Field(default=None, gt=0)
    usd_per_hour: float | None = Field(default=None, gt=0)
    usd_per_day: float | None = Field(default=None, gt=0)


class JudgeBudget(Budget):
    """The whole judge's budget: a daily US dollar ceiling unless set (``null`` removes it)."""

    usd_per_day: float | None = Field(default=DEFAULT_USD_PER_DAY, gt=0)


class Judge(Strict):
    """The judge's provider and limits.  ``anthropic`` authenticates with ``api_key`` (or a
    gateway at ``base_url``); ``bedrock`` with the usual AWS credential chain
    (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE, a role) in
    ``aws_region``; ``vertex`` with Google's Application Default Credentials
    (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server) in ``project_id`` and
    ``region``.  ``base_url`` overrides any provider's endpoint (a private endpoint, a test)."""

    provider: Provider = "anthropic"
    api_key: str | None = None
    api_key_file: str | None = None  # instead of api_key: the key is the file's content
    base_url: str | None = None
    aws_region: str | None = None  # bedrock; AWS_REGION / AWS_DEFAULT_REGION when unset here
    project_id: str | None = None  # vertex; ANTHROPIC_VERTEX_PROJECT_ID / GOOGLE_CLOUD_PROJECT when unset
    region: str | None = None  # vertex: global, us, eu or e.g. us-east5; CLOUD_ML_REGION when unset
    model: str = DEFAULT_MODELS["anthropic"]  # default per provider: see collector/evaluate/prices.py
    timeout: Seconds = 60.0  # per API call
    max_retries: int = Field(default=3, ge=0, le=10)  # on 429, 529, 5xx, timeouts and connection errors
    backoff: Seconds = 1.0  # first retry delay without retry-after; doubles each retry
    max_backoff: Seconds = 30.0
    max_retry_after: Seconds = 120.0  # a longer retry-after ends the call as rate limited
    max_concurrency: int = Field(default=4, gt=0)
    # Judge evaluations waiting or in flight at which new requests are refused as retryable
    # (backpressure): each holds its closed session in memory.  Work queued is never dropped.
    max_queue: int = Field(default=10_000, gt=0)
    # How long judge work may wait for a judge that cannot be reached or has no capacity
    # (retried with backoff meanwhile), counted from when it was first queued, restarts
    # included; then it becomes error/judge_unreachable_timeout.
    max_wait: Seconds = 3600.0
    requeue_backoff: Seconds = 1.0  # first wait after a failed call; doubles
    requeue_max_backoff: Seconds = 30.0  # a judge back is called again within this
    max_tokens: int = Field(default=2048, gt=0)  # output tokens per verdict, thinking included
    max_input_tokens: int = Field(default=200_000, ge=2_000)  # AgentCore's per-evaluation input quota
    # Over all judge calls of one session revision; beyond it: skipped/budget_exhausted.
    max_session_input_tokens: int | None = Field(default=2_000_000, ge=2_000)
    budget: JudgeBudget = JudgeBudget()
    prices: dict[str, Price] = Field(default_factory=dict)

    @property
    def configured(self) -> bool:
        """A cloud provider is configured by naming it (its credentials are resolved per
        call, by its SDK); the Claude API needs a key or a gateway."""
        return self.provider != "anthropic" or bool(self.api_key or self.base_url)

    @property
    def endpoint(self) -> str:
        """Where the judge's calls go, for the startup line."""
        if self.base_url:
            return self.base_url
        if self.provider == "bedrock":
            return f"bedrock-runtime.{self.aws_region}.amazonaws.com"
        if self.provider == "vertex":
            return f"Vertex AI {self.region}, project {self.project_id}"
        return "api.anthropic.com"

    def price(self, model: str) -> Price | None:
        configured = self.prices.get(model)
        if configured is not None:
            return configured
        listed = list_price(self.provider, model, self.region)
        if listed is None:
            return None
        return Price(
            input=listed.input,
            output=listed.output,
            cache_read=listed.cache_read,
            cache_write=listed.cache_write,
        )

    @model_validator(mode="before")
    @classmethod
    def _provider_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and "model" not in data:
            provider = data.get("provider", "anthropic")
            if provider in DEFAULT_MODELS:
                data = {**data, "model": DEFAULT_MODELS[provider]}
        return data

    @model_validator(mode="after")
    def _provider_fields(self) -> Judge:
        fields = {"bedrock": ("aws_region",), "vertex": ("project_id", "region"), "anthropic": ()}
        for provider, names in fields.items():
            for name in names:
                if provider != self.provider and getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} is a setting of provider {provider}, not {self.provider} - remove it, "
                        f"or set provider: {provider}"
                    )
        if self.provider != "anthropic" and self.api_key:
            raise ValueError(
                f"api_key is for provider anthropic; {self.provider} takes its credentials from "
                + (
                    "the AWS environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a role)"
                    if self.provider == "bedrock"
                    else "Google Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS)"
                )
                + " - remove api_key (and ANTHROPIC_API_KEY is then ignored)"
            )
        problem = model_problem(self.provider, self.model)
        if problem is not None:
            raise ValueError(f"model: {problem}")
        if self.provider == "bedrock" and not self.aws_region:
            raise ValueError(
                "aws_region: provider bedrock needs a region - set judge.aws_region (e.g. us-east-1) or AWS_REGION"
            )
        if self.provider == "vertex" and not self.project_id:
            raise ValueError(
                "project_id: provider vertex needs a Google Cloud project - set judge.project_id "
                "or ANTHROPIC_VERTEX_PROJECT_ID"
            )
        if self.provider == "vertex" and not self.region:
            raise ValueError(
                "region: provider vertex needs a region - set judge.region (global, us, eu or e.g. us-east5) "
                "or CLOUD_ML_REGION"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _key_from_file(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("api_key_file"):
            if data.get("api_key"):
                raise ValueError("set api_key or api_key_file, not both")
            key = read_secret(str(data["api_key_file"]), "api_key_file").strip()
            if not key:
                raise ValueError(f"api_key_file: {data['api_key_file']!r} is empty")
            data = {**data, "api_key": key}
        return data

    def __repr__(self) -> str:  # never print the key
        return (
            f"Judge(provider={self.provider!r}, model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key={'***' if self.api_key else None})"
        )


class Skills(Strict):
    """The operator's skill folders (``<name>/SKILL.md``), validated per the spec at load time."""

    paths: tuple[str, ...] = ()

    @field_validator("paths")
    @classmethod
    def _valid_skills(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        from evaluators.registry import RegistryError, load_registry

        try:
            load_registry(paths)
        except RegistryError as err:
            raise ValueError(str(err)) from None
        return paths


_CUSTOM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")
PLACEHOLDERS = (
    "invoked_skill",
    "skill_content",
    "available_skills",
    "user_message",
    "context",
    "available_tools",
    "tool_turn",
)


class Evaluator(Strict):
    enabled: bool = True
    sampling: float = Field(default=100.0, gt=0, le=100)  # percent of sessions, chosen by session hash
    model: str | None = None  # overrides judge.model
    budget: Budget = Budget()  # on top of judge.budget


class ScaleEntry(Strict):
    label: str = Field(min_length=1, max_length=64)
    value: float
    definition: str = Field(min_length=1)


class CustomEvaluator(Evaluator):
    name: str
    level: Literal["tool_call", "session"] = "session"
    instructions: str = Field(min_length=1)
    rating_scale: tuple[ScaleEntry, ...] = Field(min_length=2)
    scale_kind: Literal["categorical", "numerical"] = "categorical"
    pass_threshold: float | None = None  # default: the highest value on the scale

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _CUSTOM_NAME.match(name):
            raise ValueError(
                f"{name!r} must be 1-63 chars of a-z, 0-9, '_' and '-' (it becomes custom.<name>)"
            )
        return name

    @field_validator("instructions")
    @classmethod
    def _placeholders(cls, text: str) -> str:
        unknown = sorted({p for p in _PLACEHOLDER.findall(text) if p not in PLACEHOLDERS})
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} - use {', '.join(PLACEHOLDERS)}"
            )
        return text

    @field_validator("rating_scale")
    @classmethod
    def _scale(cls, scale: tuple[ScaleEntry, ...]) -> tuple[ScaleEntry, ...]:
        labels = [e.label for e in scale]
        values = [e.value for e in scale]
        if len(set(labels)) != len(labels) or len(set(values)) != len(values):
            raise ValueError("every rating_scale entry needs a distinct label and a distinct value")
        return scale


class Evaluators(Strict):
    skill_invoked: Evaluator = Evaluator()
    skill_selection_accuracy: Evaluator = Evaluator()
    skill_instruction_following: Evaluator = Evaluator()
    # Every eligible session: the judge's daily USD budget is the guard.
    skill_omission: Evaluator = Evaluator()
    custom: tuple[CustomEvaluator, ...] = ()

    @field_validator("custom")
    @classmethod
    def _distinct(cls, custom: tuple[CustomEvaluator, ...]) -> tuple[CustomEvaluator, ...]:
        names = [c.name for c in custom]
        if len(set(names)) != len(names):
            raise ValueError("custom evaluator names must be distinct")
        if len(custom) > 25:
            raise ValueError("at most 25 custom evaluators (AgentCore's limit)")
        return custom

    def judged(self) -> list[tuple[str, Evaluator]]:
        """The judge evaluators with their settings, custom ones as ``custom.<name>``."""
        return [
            ("skill_selection_accuracy", self.skill_selection_accuracy),
            ("skill_instruction_following", self.skill_instruction_following),
            ("skill_omission", self.skill_omission),
            *((f"custom.{c.name}", c) for c in self.custom),
        ]


class Evaluation(Protocol):
    """The sections the evaluate stage reads (``collector.config.Config`` has them all)."""

    @property
    def judge(self) -> Judge: ...

    @property
    def evaluators(self) -> Evaluators: ...

    @property
    def skills(self) -> Skills: ...


class Defaults(Strict):
    """Every evaluation section at its defaults."""

    judge: Judge = Judge()
    evaluators: Evaluators = Evaluators()
    skills: Skills = Skills()
