"""One typed configuration, loaded from YAML and validated with errors that name the fix.

Every key is optional; the defaults here are the whole of ``skillgauge serve`` with no file.
Strings may hold ``${env:VAR}`` (or ``${env:VAR:-default}``); expansion happens on parsed
values, so an environment variable can never inject YAML structure.
"""

from __future__ import annotations

import os
import re
import ssl
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*$")
_UNIT_BYTES = {
    None: 1,
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
}
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(ValueError):
    """A config problem, phrased as ``field: what is wrong - how to fix it``."""


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 300s, 15m or 6h")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration: write a number with a unit, e.g. 300s, 15m, 6h")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _bytes(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a size: write bytes or a unit, e.g. 16MiB, 200MB")
    return int(match.group(1)) * _UNIT_BYTES[match.group(2)]


Seconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0)]
Bytes = Annotated[int, BeforeValidator(_bytes), Field(gt=0)]


def _endpoint(value: str) -> str:
    _host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{value!r} is not host:port, e.g. 0.0.0.0:4317 or 127.0.0.1:9464")
    return value


Endpoint = Annotated[str, AfterValidator(_endpoint)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _read_secret(path: str, field: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ValueError(f"{field}: cannot read {path!r} ({why})") from None


class BearerAuth(_Strict):
    """``Authorization: Bearer <token>`` required on every request to a listener.

    The token comes from the environment (``bearer_token: ${env:SKILLGAUGE_TOKEN}``) or a
    file (``bearer_token_file``, one token per line: several lines let clients move to a new
    token before the old one is removed).  Tokens are compared in constant time and never
    printed; a token that expands to nothing is an error, never an open door.
    """

    bearer_token: SecretStr | None = None
    bearer_token_file: str | None = None
    _tokens: tuple[bytes, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _load(self) -> BearerAuth:
        if (self.bearer_token is None) == (self.bearer_token_file is None):
            raise ValueError(
                "set exactly one of bearer_token (e.g. ${env:SKILLGAUGE_TOKEN}) or bearer_token_file"
            )
        if self.bearer_token is not None:
            lines = [self.bearer_token.get_secret_value()]
        else:
            lines = _read_secret(str(self.bearer_token_file), "bearer_token_file").splitlines()
        tokens = [line.strip() for line in lines if line.strip()]
        if not tokens:
            raise ValueError("the bearer token is empty - an empty token would let anyone in")
        if any(not t.isascii() or not t.isprintable() or " " in t for t in tokens):
            raise ValueError("a bearer token must be printable ASCII without spaces")
        self._tokens = tuple(t.encode() for t in tokens)
        return self

    @property
    def tokens(self) -> tuple[bytes, ...]:
        return self._tokens


class Tls(_Strict):
    """TLS for one listener (PEM files); with ``client_ca_file`` it is mutual TLS: every
    client must present a certificate signed by that CA."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    min_version: Literal["1.2", "1.3"] = "1.2"

    @model_validator(mode="after")
    def _loadable(self) -> Tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            raise ValueError(
                f"cannot load cert_file {self.cert_file!r} with key_file {self.key_file!r} "
                f"({err.strerror or err}) - both must be PEM files, the key matching the certificate"
            ) from None
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(
                    f"cannot load client_ca_file {self.client_ca_file!r} ({err.strerror or err}) - "
                    "it must hold PEM CA certificates"
                ) from None
        return self


ListenerAuth = BearerAuth | Literal["none"] | None  # None: the top-level ``auth``; "none": open


class _Secured(_Strict):
    tls: Tls | None = None
    auth: ListenerAuth = None

    @field_validator("auth", mode="before")
    @classmethod
    def _one_auth(cls, value: Any) -> Any:
        # Validated here so that a mistake gets one message, not one per union member.
        if value is None or value == "none" or isinstance(value, BearerAuth):
            return value
        if not isinstance(value, dict):
            raise ValueError(
                "write auth: none (open), or auth: {bearer_token: ...} or {bearer_token_file: ...}"
            )
        try:
            return BearerAuth.model_validate(value)
        except ValidationError as err:
            raise ValueError(_explain(err).replace("(top level): ", "")) from None


class Listener(_Secured):
    endpoint: Endpoint
    max_request_bytes: Bytes = 16 * 1024**2  # after decompression, as OTLP specifies

    @property
    def host(self) -> str:
        return self.endpoint.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.endpoint.rpartition(":")[2])


class OtlpReceivers(_Strict):
    grpc: Listener | None = Listener(endpoint="0.0.0.0:4317")
    http: Listener | None = Listener(endpoint="0.0.0.0:4318")


class Receivers(_Strict):
    otlp: OtlpReceivers = OtlpReceivers()


class Status(_Secured):
    """/metrics and /v1/sessions need the token when auth is on; /healthz and /readyz stay
    open for Kubernetes probes.  ``endpoint: 127.0.0.1:9464`` keeps it on this host."""

    endpoint: Endpoint = "0.0.0.0:9464"


class Redact(_Strict):
    """Attribute keys whose values are replaced by ``[REDACTED]`` as requests arrive, so they
    never reach the spool, the judge, the status API or exported evaluation spans.  A key
    ending in ``.*`` matches every key under it (``user.*``)."""

    attributes: tuple[str, ...] = ()

    @field_validator("attributes")
    @classmethod
    def _keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            if not key.strip() or key.strip() != key or key in ("*", ".*"):
                raise ValueError(f"{key!r} is not an attribute key, e.g. user.email or user.*")
        return keys

    def matches(self, key: str) -> bool:
        return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in self.attributes)


class Storage(_Strict):
    path: str = "./skillgauge-data"  # ":memory:" turns durability off
    # Beyond this the receivers answer with backpressure until sessions close and the spool
    # is trimmed; raise it, or add replicas, if skillgauge_spool_bytes sits near it.
    max_bytes: Bytes = 4 * 1024**3
    checkpoint_interval: Seconds = 5.0  # how often spooled requests no session needs are deleted
    retention: Seconds = 7 * 86400.0  # evaluation results and coverage lines kept this long


_KEY = re.compile(r"^(span|resource):\S+$")


class Sessions(_Strict):
    keys: tuple[str, ...] = (
        "span:session.id",
        "span:gen_ai.conversation.id",
        "span:langsmith.metadata.session_id",  # LangSmith OTel mode flattens run metadata
        "resource:session.id",
    )
    idle_timeout: Seconds = 300.0
    max_duration: Seconds = 6 * 3600.0
    max_spans: int = Field(20_000, gt=0)
    max_bytes: Bytes = 200 * 1000**2
    max_open: int = Field(100_000, gt=0)
    # Acknowledged (spooled) trace requests waiting for the assembler; beyond this, backpressure.
    max_pending_requests: int = Field(64, gt=0)
    end_attribute: str = "skillgauge.session.end"
    # Closed sessions kept in memory so late spans reopen them whole (a new revision).
    reopen_cache: int = Field(2_000, ge=0)
    check_interval: Seconds = 1.0

    @field_validator("keys")
    @classmethod
    def _keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            if not _KEY.match(key):
                raise ValueError(
                    f"{key!r} must be 'span:<attribute>' or 'resource:<attribute>', e.g. span:session.id"
                )
        if not keys:
            raise ValueError("list at least one key, e.g. [span:session.id]")
        return keys


class Price(_Strict):
    """US dollars per million tokens.  Cache prices default to the API's multipliers of ``input``."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)  # default 0.1 x input
    cache_write: float | None = Field(default=None, ge=0)  # default 1.25 x input (5-minute cache)


# List prices of the default model's class; override or extend them under judge.prices.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-sonnet-5-5": Price(input=3.0, output=15.0),
}


class Budget(_Strict):
    """Hard ceilings on judge spend.  Windows are calendar hours and days (UTC)."""

    tokens_per_hour: int | None = Field(default=None, gt=0)
    tokens_per_day: int | None = Field(default=None, gt=0)
    usd_per_hour: float | None = Field(default=None, gt=0)
    usd_per_day: float | None = Field(default=None, gt=0)

    @property
    def uses_usd(self) -> bool:
        return self.usd_per_hour is not None or self.usd_per_day is not None


class Judge(_Strict):
    api_key: str | None = None
    api_key_file: str | None = None  # instead of api_key: the key is the file's content
    base_url: str | None = None
    model: str = "claude-sonnet-5-5"
    timeout: Seconds = 60.0  # per API call
    max_retries: int = Field(default=3, ge=0, le=10)  # on 429, 529, 5xx, timeouts and connection errors
    backoff: Seconds = 1.0  # first retry delay without retry-after; doubles each retry
    max_backoff: Seconds = 30.0
    max_retry_after: Seconds = 120.0  # a longer retry-after ends the call as rate limited
    max_concurrency: int = Field(default=4, gt=0)
    max_queue: int = Field(
        default=1000, gt=0
    )  # judge evaluations waiting or in flight; beyond: skipped/queue_full
    max_tokens: int = Field(default=1024, gt=0)  # output tokens per verdict
    max_input_tokens: int = Field(default=200_000, ge=2_000)  # AgentCore's per-evaluation input quota
    budget: Budget = Budget()
    prices: dict[str, Price] = {}

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.base_url)

    def price(self, model: str) -> Price | None:
        return self.prices.get(model) or DEFAULT_PRICES.get(model)

    @model_validator(mode="before")
    @classmethod
    def _key_from_file(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("api_key_file"):
            if data.get("api_key"):
                raise ValueError("set api_key or api_key_file, not both")
            key = _read_secret(str(data["api_key_file"]), "api_key_file").strip()
            if not key:
                raise ValueError(f"api_key_file: {data['api_key_file']!r} is empty")
            data = {**data, "api_key": key}
        return data

    def __repr__(self) -> str:  # never print the key
        return f"Judge(model={self.model!r}, base_url={self.base_url!r}, api_key={'***' if self.api_key else None})"


class Retry(_Strict):
    """Backoff between failed export attempts.  There is no give-up time: a result leaves
    only when the downstream acknowledges it (or refuses it as malformed)."""

    initial_interval: Seconds = 1.0
    max_interval: Seconds = 30.0
    multiplier: float = Field(default=2.0, ge=1.0)

    @field_validator("max_interval")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        if value < info.data.get("initial_interval", 0.0):
            raise ValueError("must be at least initial_interval")
        return value


class OtlpExport(_Strict):
    """Evaluation spans (and optionally ``gen_ai.evaluation.result`` log records) downstream."""

    endpoint: str  # http://host:4317 plaintext, https://host:4317 TLS; for http, the base URL
    protocol: Literal["grpc", "http"] = "grpc"
    headers: dict[str, str] = {}
    timeout: Seconds = 10.0
    compression: Literal["gzip", "none"] = "gzip"
    logs: bool = False  # also send each result as a gen_ai.evaluation.result log record
    batch_size: int = Field(default=512, gt=0)
    queue_size: int = Field(default=100_000, gt=0)  # results held while the downstream is away
    retry: Retry = Retry()

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in ("http", "https") or not rest.strip("/"):
            raise ValueError(
                f"{value!r} is not a URL: write http://host:4317 (plaintext) or https://host:4317 (TLS)"
            )
        return value.rstrip("/")

    @property
    def tls(self) -> bool:
        return self.endpoint.startswith("https://")

    @property
    def authority(self) -> str:
        """host:port for gRPC (default port 4317 for grpc, 4318 for http)."""
        rest = self.endpoint.partition("://")[2].partition("/")[0]
        if rest.rpartition(":")[2].isdigit() and not rest.endswith("]"):
            return rest
        return f"{rest}:{4317 if self.protocol == 'grpc' else 4318}"


class Export(_Strict):
    otlp: OtlpExport | None = None


class Skills(_Strict):
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


class Evaluator(_Strict):
    enabled: bool = True
    sampling: float = Field(default=100.0, gt=0, le=100)  # percent of sessions, chosen by session hash
    model: str | None = None  # overrides judge.model
    budget: Budget = Budget()  # on top of judge.budget


class ScaleEntry(_Strict):
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


class Evaluators(_Strict):
    skill_invoked: Evaluator = Evaluator()
    skill_selection_accuracy: Evaluator = Evaluator()
    skill_instruction_following: Evaluator = Evaluator()
    skill_omission: Evaluator = Evaluator(sampling=10.0)  # runs on many sessions: sampled on its own
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


class When(_Strict):
    user_message: str | None = None  # a regular expression searched in every user message
    attribute: dict[str, str] | None = None  # span or resource attribute equals value

    @field_validator("user_message")
    @classmethod
    def _regex(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{pattern!r} is not a regular expression: {err}") from None
        return pattern


class Expectation(_Strict):
    when: When
    expect: tuple[str, ...] = Field(min_length=1)

    @field_validator("expect", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class Config(_Strict):
    receivers: Receivers = Receivers()
    status: Status = Status()
    storage: Storage = Storage()
    sessions: Sessions = Sessions.model_validate({})
    judge: Judge = Judge()
    export: Export = Export()
    skills: Skills = Skills()
    evaluators: Evaluators = Evaluators()
    expectations: tuple[Expectation, ...] = ()
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    auth: BearerAuth | None = None  # every listener without an ``auth`` of its own
    redact: Redact = Redact()

    def auth_for(self, listener: Listener | Status) -> BearerAuth | None:
        """The auth a listener enforces: its own, else the top-level one; ``none`` = open."""
        if listener.auth == "none":
            return None
        return listener.auth or self.auth

    @model_validator(mode="after")
    def _redact_keeps_session_keys(self) -> Config:
        keys = [k.partition(":")[2] for k in self.sessions.keys] + [self.sessions.end_attribute]
        for key in keys:
            if self.redact.matches(key):
                raise ValueError(
                    f"redact.attributes: {key!r} groups spans into sessions (sessions.keys / "
                    "end_attribute) and cannot be redacted - remove it from one of the lists"
                )
        return self

    @model_validator(mode="after")
    def _priced(self) -> Config:
        # Every judged row carries its cost, and a USD ceiling that ignores an unpriced model
        # is no ceiling: a model the judge may use must have a price.
        if not self.judge.configured:
            return self
        models = {self.judge.model} | {e.model for _, e in self.evaluators.judged() if e.model}
        for model in sorted(models):
            if self.judge.price(model) is None:
                raise ValueError(
                    f"judge.prices: no price for model {model!r} - add "
                    f"judge.prices.{model}: {{input: <USD per Mtok>, output: <USD per Mtok>}}"
                )
        return self


def _expand(node: Any, where: str) -> Any:
    if isinstance(node, str):

        def repl(match: re.Match[str]) -> str:
            value = os.environ.get(match.group(1), match.group(2))
            if value is None:
                raise ConfigError(
                    f"{where}: environment variable {match.group(1)} is not set - export it or write ${{env:{match.group(1)}:-default}}"
                )
            return value

        return _ENV.sub(repl, node)
    if isinstance(node, dict):
        return {k: _expand(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(node)]
    return node


def _drop_empty(node: Any) -> Any:
    # `${env:ANTHROPIC_API_KEY}` expanding to "" means "not set": treat as absent.
    if isinstance(node, dict):
        return {k: _drop_empty(v) for k, v in node.items() if v != ""}
    return node


def _explain(err: ValidationError) -> str:
    lines = []
    for problem in err.errors():
        field = ".".join(str(p) for p in problem["loc"]) or "(top level)"
        if problem["type"] == "extra_forbidden":
            lines.append(
                f"{field}: unknown key - check its spelling against the config reference in README.md"
            )
        else:
            msg = problem["msg"].removeprefix("Value error, ")
            lines.append(f"{field}: {msg}")
    return "\n".join(lines)


def parse(data: Any, source: str = "config") -> Config:
    """Validate already-parsed YAML data, then apply ANTHROPIC_* from the environment."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys such as receivers, sessions, judge"
        )
    data = _drop_empty(_expand(data, ""))
    judge = data.setdefault("judge", {}) if isinstance(data.get("judge", {}), dict) else data["judge"]
    if isinstance(judge, dict):
        for key, env in (("api_key", "ANTHROPIC_API_KEY"), ("base_url", "ANTHROPIC_BASE_URL")):
            if key not in judge and f"{key}_file" not in judge and os.environ.get(env):
                judge[key] = os.environ[env]
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_explain(err)) from None


def load(path: str | Path | None) -> Config:
    if path is None:
        return parse({})
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML - {err}") from None
    return parse(data, str(path))
