"""One typed configuration, loaded from YAML and validated with errors that name the fix.

Every key is optional; the defaults here are the whole of ``skillgauge serve`` with no file.
Strings may hold ``${env:VAR}`` (or ``${env:VAR:-default}``); expansion happens on parsed
values, so an environment variable can never inject YAML structure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
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


class Listener(_Strict):
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


class Status(_Strict):
    endpoint: Endpoint = "0.0.0.0:9464"


class Storage(_Strict):
    path: str = "./skillgauge-data"  # ":memory:" turns durability off


_KEY = re.compile(r"^(span|resource):\S+$")


class Sessions(_Strict):
    keys: tuple[str, ...] = ("span:session.id", "span:gen_ai.conversation.id", "resource:session.id")
    idle_timeout: Seconds = 300.0
    max_duration: Seconds = 6 * 3600.0
    max_spans: int = Field(20_000, gt=0)
    max_bytes: Bytes = 200 * 1000**2
    max_open: int = Field(100_000, gt=0)
    end_attribute: str = "skillgauge.session.end"
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


class Judge(_Strict):
    api_key: str | None = None
    base_url: str | None = None
    model: str = "claude-sonnet-5-5"
    timeout: Seconds = 60.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.base_url)

    def __repr__(self) -> str:  # never print the key
        return f"Judge(model={self.model!r}, base_url={self.base_url!r}, api_key={'***' if self.api_key else None})"


class OtlpExport(_Strict):
    endpoint: str
    protocol: Literal["grpc", "http"] = "grpc"


class Export(_Strict):
    otlp: OtlpExport | None = None


class Skills(_Strict):
    paths: tuple[str, ...] = ()


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
    expectations: tuple[Expectation, ...] = ()
    log_level: Literal["debug", "info", "warning", "error"] = "info"


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
            if key not in judge and os.environ.get(env):
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
