"""Field types every component's config section is built from: strict models, durations,
sizes, endpoints, secrets read from files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def read_secret(path: str, field: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ValueError(f"{field}: cannot read {path!r} ({why})") from None


def explain(err: ValidationError) -> str:
    """Each problem pydantic found, one line each, named by its dotted field path."""
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
