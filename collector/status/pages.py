"""The built-in read-only pages under /ui/, in the spirit of the Collector's zpages:
server-rendered HTML, plain GET forms, no JavaScript.

Every string from a trace (session ids, skill names, judge explanations) is untrusted:
templates are rendered with autoescaping on, and a trace link is only built from a trace id
of 32 hex digits.  ``trace_link`` turns a trace id into the operator's tracing backend URL
(``status.trace_url``), or None when none is configured.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from aiohttp import web

from collector.status import explain
from collector.status import query as session_query
from collector.status.tenancy import detail_tenant, held, listing_tenant, open_rows
from collector.status.view import DEFAULT_LIMIT, MAX_LIMIT, SessionPage, SessionQuery, StatusView
from evaluators.result import STATUSES

if TYPE_CHECKING:
    import jinja2

UNKNOWN_SESSION = (
    "unknown session: no span has carried this id, or its results are older than storage.retention"
)
# The built-in evaluations, offered by the filter form (custom ones are typed in).
EVALUATIONS = (
    "skill_selection_accuracy",
    "skill_instruction_following",
    "skill_omission",
    "skill_invoked",
)
WINDOWS = (("hour", "Last hour", 3600.0), ("day", "Last day", 86400.0))
TraceLink = Callable[[str], str | None]
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


@functools.cache
def _templates() -> jinja2.Environment:
    """The pages' templates and their filters, made when the first page is rendered (jinja2
    is imported then, not when serve starts).  A key a record may lack (fields added in later
    versions, optional ones) renders as nothing."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("collector.status", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = utc
    env.filters["duration"] = explain.duration
    return env


def render(template: str, **context: Any) -> web.Response:
    body = _templates().get_template(template).render(**context)
    return web.Response(
        text=body,
        content_type="text/html",
        charset="utf-8",
        headers={
            # No script runs on these pages, and nothing loads from elsewhere.
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
            # Same-origin requests carry their origin (the login's Origin check), others nothing.
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        },
    )


def safe_trace_link(trace_link: TraceLink) -> Callable[[object], str | None]:
    def link(trace_id: object) -> str | None:
        if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id):
            return None
        return trace_link(trace_id)

    return link


def revision(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One revision's records (results, then the coverage line) as the session page shows them."""
    coverage: dict[str, Any] = next((r["coverage"] for r in records if "coverage" in r), {})
    results = [{**r, "evidence": explain.evidence(r, coverage)} for r in records if "coverage" not in r]
    why = (coverage.get("expectations") or {}).get("why") or {}
    expected = [
        {
            "skill": skill,
            "met": skill in (coverage.get("expectations") or {}).get("met", []),
            "why": explain.why_expected(why.get(skill)),
        }
        for skill in (coverage.get("expectations") or {}).get("expected", [])
    ]
    return {
        "coverage": coverage,
        "results": results,
        "expected": expected,
        "catalog_words": explain.catalog_words(coverage, results),
        "loads": [{**load, "recorded": explain.load_words(load)} for load in coverage.get("skill_loads", [])],
    }


def page_of(session_id: str, tenant: str = "") -> str:
    path = f"/ui/sessions/{quote(session_id, safe='')}"
    return f"{path}?{urlencode({'tenant': tenant})}" if tenant else path


def utc(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def iso(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, as a link's ``since`` carries it."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def filtered(**params: object) -> str:
    """The /ui/sessions page filtered by ``params`` (names, and times as RFC 3339)."""
    return "/ui/sessions?" + urlencode(
        {
            k: iso(v) if k in ("since", "until") and isinstance(v, int | float) else v
            for k, v in params.items()
        }
    )


def described(query: SessionQuery, now: float) -> list[str]:
    """The filters of ``query`` in words, times readable (shown above the list)."""
    said = []
    for name in ("since", "until"):
        value = getattr(query, name)
        if value is not None:
            ago = explain.duration(now - value)
            said.append(
                f"closed {'at or after' if name == 'since' else 'before'} {utc(value)} UTC ({ago} ago)"
            )
    row = [
        f"{name} {getattr(query, name)}"
        for name in ("evaluation", "status", "reason", "skill")
        if getattr(query, name) is not None
    ]
    if query.passed is not None:
        row.append("passed" if query.passed else "failed (passed=false)")
    if row:
        said.append("with an evaluation row: " + ", ".join(row))
    if query.framework is not None:
        said.append(f"framework {query.framework}")
    return said


def given(params: Mapping[str, str]) -> dict[str, str]:
    """The filter form's fields that were filled in (a GET form sends empty ones too)."""
    return {k: v for k, v in params.items() if v.strip()}


def routes(view: StatusView, trace_link: TraceLink) -> list[web.RouteDef]:
    link = safe_trace_link(trace_link)

    async def overview(request: web.Request) -> web.Response:
        tenant = listing_tenant(request, request.query.get("tenant"))
        now = time.time()
        windows = []
        for name, title, seconds in WINDOWS:
            since = int(now - seconds)
            windows.append(
                {
                    "name": name,
                    "title": title,
                    "data": await view.overview(since, tenant),
                    "links": {
                        "sessions": filtered(since=since),
                        "skipped": filtered(evaluation="skill_invoked", passed="false", since=since),
                        "omissions": filtered(evaluation="skill_omission", passed="false", since=since),
                    },
                }
            )
        return render("overview.html", windows=windows, now=utc(now))

    async def sessions(request: web.Request) -> web.Response:
        params = given(request.query)
        form = {name: params.get(name, "") for name in session_query.PARAMETERS}
        form["limit"] = form["limit"] or str(DEFAULT_LIMIT)
        context: dict[str, Any] = {
            "form": form,
            "statuses": STATUSES,
            "evaluations": EVALUATIONS,
            "rows": [],
            "older": None,
            "error": None,
            "filters": [],
            "open": [],
            "only_open": params.get("state") == "open",
        }
        try:
            query = session_query.parse(params)
        except session_query.BadParameter as err:
            context["error"] = str(err)
            response = render("sessions.html", **context)
            response.set_status(400)
            return response
        scoped = held(request, query)
        context["filters"] = described(query, time.time())
        if "cursor" not in params and scoped is not None:
            context["open"] = [
                {**row, "page": page_of(row["session_id"], row["tenant"])}
                for row in open_rows(view, replace(scoped, limit=MAX_LIMIT))
            ]
        if scoped is not None and scoped.state == "open":
            return render("sessions.html", **context)
        page = await view.sessions(scoped) if scoped is not None else SessionPage()
        context["rows"] = [
            {
                **row,
                "closed": utc(row.get("closed_at")),
                "page": page_of(str(row.get("session_id", "")), str(row.get("tenant") or "")),
            }
            for row in page.rows
        ]
        if page.next_cursor is not None:
            older = {k: v for k, v in params.items() if k != "cursor"}
            context["older"] = f"/ui/sessions?{urlencode({**older, 'cursor': page.next_cursor})}"
        return render("sessions.html", **context)

    async def session(request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        live, revisions = await view.session(session_id, detail_tenant(request))
        shown = [revision(records) for records in reversed(revisions)]  # latest first
        response = render(
            "session.html",
            session_id=session_id,
            live=live,
            revisions=shown,
            trace_link=link,
            why_no_results=UNKNOWN_SESSION,
        )
        if live is None and not revisions:
            response.set_status(404)
        return response

    async def home(_: web.Request) -> web.Response:
        return web.Response(status=308, headers={"Location": "/ui/"})

    return [
        web.get("/ui", home),
        web.get("/ui/", overview),
        web.get("/ui/sessions", sessions),
        web.get("/ui/sessions/{session_id}", session),
    ]
