"""``GET /v1/sessions``'s query string as a ``SessionQuery``: each parameter checked, and a
bad one refused with a message that names it and says what it takes.

Times are unix seconds, RFC 3339 with an offset, or a duration back from now (``2h``,
``30m``, ``7d``: what an alert's link can carry, since a rule's annotation cannot name the
time it fired)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import datetime

from collector.status.view import MAX_LIMIT, SessionQuery, decode_cursor
from evaluators.result import STATUSES

_TEXT = ("evaluation", "status", "reason", "skill", "framework", "tenant")
PARAMETERS = ("since", "until", *_TEXT, "passed", "limit", "cursor", "state")
# What a listing of open sessions takes (nothing of theirs is evaluated yet).
OPEN_PARAMETERS = ("tenant", "limit", "state")
_AGO = re.compile(r"(\d+)(m|h|d)")
_AGO_SECONDS = {"m": 60, "h": 3600, "d": 86400}


class BadParameter(ValueError):
    """A query parameter that cannot be used: ``str()`` names it and the fix."""


def parse(params: Mapping[str, str], now: float | None = None) -> SessionQuery:
    """``now``: the time a duration counts back from (unix seconds; the clock's without it)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise BadParameter(f"unknown parameter {unknown[0]!r}: use {', '.join(PARAMETERS)}")
    values: dict[str, object] = {}
    for name in ("since", "until"):
        if name in params:
            values[name] = _time(name, params[name], time.time() if now is None else now)
    for name in _TEXT:
        if name in params:
            if not params[name] and name != "tenant":  # tenant= names the default tenant ""
                raise BadParameter(f"{name}: empty; give a value or leave the parameter out")
            values[name] = params[name]
    if "status" in params:
        values["status"] = _statuses(params["status"])
    if "passed" in params:
        passed = params["passed"].lower()
        if passed not in ("true", "false"):
            raise BadParameter(
                f"passed: {params['passed']!r} is not a boolean; use passed=true or passed=false"
            )
        values["passed"] = passed == "true"
    if "limit" in params:
        try:
            limit = int(params["limit"])
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_LIMIT:
            raise BadParameter(f"limit: {params['limit']!r}; use a whole number from 1 to {MAX_LIMIT}")
        values["limit"] = limit
    if "cursor" in params:
        try:
            decode_cursor(params["cursor"])
        except ValueError:
            raise BadParameter(
                "cursor: not a cursor this API returned; pass next_cursor of the previous page unchanged, "
                "or leave it out for the first page"
            ) from None
        values["cursor"] = params["cursor"]
    if "state" in params:
        if params["state"] not in ("open", "closed"):
            raise BadParameter(
                f"state: {params['state']!r}; use state=open (sessions still open) or state=closed (the default)"
            )
        values["state"] = params["state"]
        if params["state"] == "open":
            extra = sorted(set(params) - set(OPEN_PARAMETERS))
            if extra:
                raise BadParameter(
                    f"{extra[0]}: filters evaluated sessions; state=open takes only {', '.join(OPEN_PARAMETERS)}"
                )
    query = SessionQuery(**values)  # type: ignore[arg-type]
    if query.since is not None and query.until is not None and query.since >= query.until:
        raise BadParameter("since: not before until; give since < until (since inclusive, until exclusive)")
    return query


def _statuses(text: str) -> str:
    """One result status, or several joined by commas (``skipped,error``: what could have been
    judged and was not), each one ``evaluators.result.STATUSES`` names."""
    given = [part.strip() for part in text.split(",")]
    for part in given:
        if part not in STATUSES:
            raise BadParameter(
                f"status: {part!r} is not a result status; use one of {', '.join(STATUSES)}, "
                "or several joined by commas (status=skipped,error)"
            )
    return ",".join(given)


def _time(name: str, text: str, now: float) -> float:
    """Unix seconds, from unix seconds, an RFC 3339 time with its offset, or a duration ago."""
    ago = _AGO.fullmatch(text.strip())
    if ago:
        return now - int(ago.group(1)) * _AGO_SECONDS[ago.group(2)]
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
    try:
        # An unencoded "+" in a query string arrives as a space: "...T00:00:00 02:00".
        moment = datetime.fromisoformat(text.replace(" ", "+"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise BadParameter(
            f"{name}: {text!r} is not a time; use unix seconds (1767225600), RFC 3339 with an offset "
            "(2026-01-01T00:00:00Z) or a duration back from now (2h, 30m, 7d)"
        )
    return moment.timestamp()
