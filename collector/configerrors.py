"""Config problems as people read them: ``[file:line: ]field: what is wrong - how to fix it``.

``explain`` turns pydantic's validation errors into such lines, in its own words (never
pydantic's), with a "did you mean" for a misspelt key or choice and the line of the field
when the caller knows where each key is (``collector.configfile.Lines``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

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
    return "\n".join(sorted(lines, key=line_number))


def line_number(text: str) -> int:
    """The line a located problem names ("file:12: ..." -> 12; 0 when none), to sort by."""
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
