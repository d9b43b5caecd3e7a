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
    PlainSerializer,
    ValidationInfo,
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


def _seconds(value: Any, info: ValidationInfo) -> float:
    # Code may pass seconds as a number; a config file must name the unit (``300`` could
    # mean seconds or milliseconds to its reader).
    from_file = bool(info.context and info.context.get(FROM_FILE))
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 300s, 15m or 6h")
    if isinstance(value, int | float) and not from_file:
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration: write a number with a unit, e.g. 300s, 15m, 6h")
    if match.group(2) is None and from_file:
        raise ValueError(
            f"{value} has no unit - write {match.group(1)}s (a number and ms, s, m, h or d, e.g. 30s, 5m or 1h)"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def duration_text(seconds: float) -> str:
    """``seconds`` as the largest whole unit a config file accepts: 300.0 -> ``5m``."""
    for unit in ("d", "h", "m", "s"):
        count = seconds / _UNIT_SECONDS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds * 1000:g}ms"


def size_text(count: int) -> str:
    """``count`` bytes as a config file would write it: 16777216 -> ``16MiB``."""
    for unit in ("GiB", "GB", "MiB", "MB", "KiB", "KB"):
        if count >= _UNIT_BYTES[unit] and count % _UNIT_BYTES[unit] == 0:
            return f"{count // _UNIT_BYTES[unit]}{unit}"
    return f"{count}B"


def _bytes(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a size: write bytes or a unit, e.g. 16MiB, 200MB")
    return int(match.group(1)) * _UNIT_BYTES[match.group(2)]


# Validation context key set by ``collector.config.parse``: values come from a config file.
FROM_FILE = "from_config_file"

# In JSON mode (``skillgauge config --defaults``) durations and sizes are written with units.
Seconds = Annotated[
    float, BeforeValidator(_seconds), Field(gt=0), PlainSerializer(duration_text, when_used="json")
]
NonNegativeSeconds = Annotated[  # where 0 means "not at all"
    float, BeforeValidator(_seconds), Field(ge=0), PlainSerializer(duration_text, when_used="json")
]
Bytes = Annotated[int, BeforeValidator(_bytes), Field(gt=0), PlainSerializer(size_text, when_used="json")]


def _endpoint(value: str) -> str:
    _host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{value!r} is not host:port, e.g. 0.0.0.0:4317 or 127.0.0.1:9464")
    return value


def _text(value: Any) -> Any:
    # YAML reads ``endpoint: 9464`` as a number: say what is wrong with it as an endpoint.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Endpoint = Annotated[str, BeforeValidator(_text), AfterValidator(_endpoint)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def read_secret(path: str, field: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ValueError(f"{field}: cannot read {path!r} ({why})") from None
