"""The built-in read-only pages under /ui/, in the spirit of the Collector's zpages:
server-rendered HTML, plain GET forms, no JavaScript.

Every string from a trace (session ids, skill names, judge explanations) is untrusted:
templates are rendered with autoescaping on, and a trace link is only built from a trace id
of 32 hex digits.  ``trace_link`` turns a trace id into the operator's tracing backend URL
(``status.trace_url``), or None when none is configured.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jinja2
from aiohttp import web

from collector.status.view import StatusView

UNKNOWN_SESSION = (
    "unknown session: no span has carried this id, or its results are older than storage.retention"
)
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
            "Referrer-Policy": "no-referrer",
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


def routes(view: StatusView, trace_link: TraceLink) -> list[web.RouteDef]:
    link = safe_trace_link(trace_link)

    async def session(request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        live, revisions = await view.session(session_id)
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

    return [web.get("/ui/sessions/{session_id}", session)]
