"""The built-in read-only pages under /ui/, in the spirit of the Collector's zpages:
server-rendered HTML, plain GET forms, no JavaScript.

Every string from a trace (session ids, skill names, judge explanations) is untrusted:
templates are rendered with autoescaping on, and a trace link is only built from a trace id
of 32 hex digits.  ``trace_link`` turns a trace id into the operator's tracing backend URL
(``status.trace_url``), or None when none is configured.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from collector.status import query as session_query
from collector.status.tenancy import detail_tenant, held, listing_tenant
from collector.status.view import DEFAULT_LIMIT, SessionPage, StatusView
from evaluators.result import STATUSES

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

# A key a record may lack (fields added in later versions, optional ones) renders as nothing.
_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("collector.status", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(template: str, **context: Any) -> web.Response:
    body = _ENV.get_template(template).render(**context)
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


def evidence(result: dict[str, Any], loads: list[dict[str, Any]]) -> list[str]:
    """What a result's verdict was based on, as the record keeps it."""
    items = []
    span = result.get("span_id")
    for index, load in enumerate(loads, 1):
        if span and load.get("span_id") == span:
            items.append(f"load #{index} of {load['skill']} ({load['status']}, {load['signal']})")
            break
    else:
        if result.get("signal"):
            items.append(f"signal {result['signal']}")
    if result.get("body_source"):
        items.append(f"SKILL.md body: {result['body_source']}")
    if result.get("catalog_source"):
        items.append(f"catalog: {result['catalog_source']}")
    return items


def revision(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One revision's records (results, then the coverage line) as the session page shows them."""
    coverage: dict[str, Any] = next((r["coverage"] for r in records if "coverage" in r), {})
    loads = coverage.get("skill_loads", [])
    results = [{**r, "evidence": evidence(r, loads)} for r in records if "coverage" not in r]
    return {"coverage": coverage, "results": results}


def page_of(session_id: str, tenant: str = "") -> str:
    path = f"/ui/sessions/{quote(session_id, safe='')}"
    return f"{path}?{urlencode({'tenant': tenant})}" if tenant else path


def utc(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


_ENV.filters["utc"] = utc


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
                        "sessions": f"/ui/sessions?{urlencode({'since': since})}",
                        "omissions": "/ui/sessions?"
                        + urlencode({"since": since, "evaluation": "skill_omission", "passed": "false"}),
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
        }
        try:
            query = session_query.parse(params)
        except session_query.BadParameter as err:
            context["error"] = str(err)
            response = render("sessions.html", **context)
            response.set_status(400)
            return response
        scoped = held(request, query)
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
