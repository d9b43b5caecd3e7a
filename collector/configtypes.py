"""Field types every component's config section is built from: strict models, durations,
sizes, endpoints, secrets read from files."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import ErrorDetails

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


Loc = tuple[int | str, ...]
_NAMED = re.compile(r"^([a-z_]+(?:\.[A-Za-z0-9_-]+)*): ")


def explain(
    err: ValidationError,
    root: type[BaseModel] | None = None,
    line_of: Callable[[Loc, bool], int | None] | None = None,
    source: str | None = None,
) -> str:
    """Each problem pydantic found, one line each: ``[source:line: ]field: problem - fix``.

    ``root`` is the model validated (it lists the keys an unknown one may be a typo of);
    ``line_of(loc, key)`` gives the file line of a field (of its key when ``key``)."""
    lines = []
    for problem in err.errors():
        loc = tuple(problem["loc"])
        text = describe(problem, root)
        if loc or not _NAMED.match(text):
            text = f"{'.'.join(str(p) for p in loc) or '(top level)'}: {text}"
        lines.append(locate(text, source, line_of, problem["type"] == "extra_forbidden"))
    return "\n".join(sorted(lines, key=_line_number))


def _line_number(text: str) -> int:
    # "file:12: ..." -> 12, so problems are listed in file order (unlocated ones first).
    match = re.match(r"^.*?:(\d+): ", text)
    return int(match.group(1)) if match else 0


def locate(
    text: str, source: str | None, line_of: Callable[[Loc, bool], int | None] | None, key: bool = False
) -> str:
    """``field: problem`` prefixed with ``source:line:`` (the line of ``field`` in the file)."""
    if source is None:
        return text
    named = _NAMED.match(text)
    line = None
    if named and line_of is not None:
        loc = tuple(int(p) if p.isdigit() else p for p in named.group(1).split("."))
        line = line_of(loc, key)
    return f"{source}:{line}: {text}" if line else f"{source}: {text}"


def describe(problem: ErrorDetails, root: type[BaseModel] | None = None) -> str:
    """One pydantic problem as ``what is wrong - how to fix it``, never pydantic's wording."""
    kind, ctx, got = problem["type"], problem.get("ctx") or {}, problem.get("input")
    loc = tuple(problem["loc"])
    last = str(loc[-1]) if loc else "key"
    if kind == "extra_forbidden":
        known = keys_at(root, loc[:-1]) if root is not None else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        if close:
            return f"unknown key - did you mean {close[0]}?"
        elsewhere = [".".join(path) for path in _paths_of(root, str(loc[-1]))] if root is not None else []
        if elsewhere:
            under = " or ".join(elsewhere[:2]) + (
                f" (or {len(elsewhere) - 2} more)" if len(elsewhere) > 2 else ""
            )
            return f"unknown key here - {loc[-1]} belongs under {under}: check its indentation"
        if known:
            return f"unknown key - the keys here are {', '.join(known)}"
        return "unknown key - check its spelling against the config reference in README.md"
    if kind in ("float_parsing", "float_type", "int_parsing", "int_type"):
        return f"expected a number, got {got!r} - write digits only, e.g. {last}: 100"
    if kind == "int_from_float":
        return f"expected a whole number, got {got!r} - write e.g. {last}: {int(got) if isinstance(got, float) else 1}"
    if kind in ("bool_parsing", "bool_type"):
        return f"expected true or false, got {got!r}"
    if kind == "string_type":
        return f"expected text, got {got!r} - put it in quotes"
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        close = difflib.get_close_matches(str(got), re.findall(r"'([^']*)'", expected), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{got!r} is not allowed - {hint}use one of {expected}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = {
            "greater_than": ("more than", "gt"),
            "greater_than_equal": ("at least", "ge"),
            "less_than": ("less than", "lt"),
            "less_than_equal": ("at most", "le"),
        }[kind]
        return f"{got!r} is out of range - it must be {bound[0]} {ctx.get(bound[1])}"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s) - add one"
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} item(s) or characters - shorten it"
    if kind == "missing":
        return f"required - add {last}: <value>"
    if kind in ("model_type", "model_attributes_type", "dict_type") and isinstance(got, bool):
        return (
            f"expected a mapping of keys, got {str(got).lower()} (YAML reads off, no, on and yes as true "
            f"or false) - write {last}: null to turn it off, or {last}: {{key: value}}"
        )
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping of keys, got {got!r} - write {last}: {{key: value}} or indented key: value lines"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {got!r} - write {last}: [a, b] or one '- item' per line"
    return str(problem["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def keys_at(root: type[BaseModel], path: Loc) -> list[str]:
    """The keys the model at ``path`` (a validation location under ``root``) accepts."""
    node: Any = root
    for part in path:
        node = _model_or_item(node, part)
        if node is None:
            return []
    model = _model_or_item(node, None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _paths_of(root: type[BaseModel], key: str, depth: int = 4) -> list[tuple[str, ...]]:
    """The models (as paths from ``root``) that have a field ``key``: for a key indented at
    the wrong level.  ``root`` itself is not among them."""
    found: list[tuple[str, ...]] = []
    if depth == 0:
        return found
    for name, field in root.model_fields.items():
        model = _model_or_item(field.annotation, None)
        if isinstance(model, type) and issubclass(model, BaseModel):
            if key in model.model_fields:
                found.append((name,))
            found += [(name, *path) for path in _paths_of(model, key, depth - 1)]
    return found


def _model_or_item(tp: Any, part: int | str | None) -> Any:
    # Through Annotated, unions (the first model member), tuples and dicts to what ``part`` names.
    while True:
        origin, args = get_origin(tp), get_args(tp)
        if origin is Annotated:
            tp = args[0]
        elif origin in (Union, UnionType):
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if not models:
                return None
            tp = models[0]
        else:
            break
    if part is None:
        return tp
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(str(part))
        return field.annotation if field is not None else None
    if origin in (tuple, list) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None
