"""The status extension: /metrics, /healthz, /readyz, GET /v1/sessions (the query API),
GET /v1/sessions/{id} and the /ui/ pages, beside the chain (it reads a ``StatusView``).

With auth configured, /metrics, /v1/sessions* and /ui/ need the bearer token (sessions hold
what agents said); /healthz and /readyz stay open, because Kubernetes probes send no
credentials and say nothing about any session.  A browser cannot send a bearer header, so
the /ui/ pages also take a page session's cookie, which ``POST /ui/login`` sets and
``POST /ui/logout`` ends (``login``: the cookie holds a session id, never the token);
/ui/login and /ui/logout themselves are open.  Without auth,
/v1/sessions* and /ui/ answer loopback clients only (127.0.0.0/8, ::1) unless
``status.sessions_open: true``; others get 403.

Tenants: a token reads only the sessions of its own tenant.  ``/v1/sessions/{id}`` of
another tenant's session answers 404, as for an unknown id, so ids do not leak, and
``/v1/sessions`` lists only its tenant's.  An operator's token (``tenant: "*"``) reads any
tenant's: ``?tenant=team-a`` names one (the detail of the default tenant's without it; the
listing of every tenant's without it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from collector.receiver import auth as listener_auth
from collector.receiver.config import BearerAuth
from collector.status import pages
from collector.status import query as session_query
from collector.status.login import PageLogin
from collector.status.readers import RETRY_AFTER, StoreUnavailable
from collector.status.tenancy import detail_tenant, held, open_rows
from collector.status.view import SessionPage, StatusView

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/ui/login", "/ui/logout"})
NOT_LOOPBACK = (
    "/v1/sessions answers only clients on this host (loopback) while no auth is configured: "
    "configure a bearer token (auth), or set status.sessions_open: true to serve every client"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(path: str) -> bool:
    return path not in OPEN_PATHS


def _endpoint(path: str) -> str:
    """The endpoint label of a request (metrics | sessions | ui); "" for other paths, which
    are probes or 404s: not worth a series."""
    if path == "/metrics":
        return "metrics"
    if path == "/v1/sessions" or path.startswith("/v1/sessions/"):
        return "sessions"
    return "ui" if path == "/ui" or path.startswith("/ui/") else ""


def _unauthenticated(view: StatusView) -> listener_auth.Refusal:
    def refuse(request: web.Request) -> web.Response:
        endpoint = _endpoint(request.path)
        if endpoint:
            view.count_refusal(endpoint)
        if endpoint == "ui":  # a person with a browser: offer the login form
            response = pages.render("login.html", failed=False)
            response.set_status(401)
            return response
        # The shape of a google.rpc.Status in JSON, as the OTLP/HTTP receiver answers.
        return web.json_response({"code": 16, "message": listener_auth.MESSAGE}, status=401)

    return refuse


def is_loopback(remote: str | None) -> bool:
    """Whether a peer address is this host's loopback (an IPv4-mapped one included)."""
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _loopback_only(view: StatusView) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint = _endpoint(request.path)
        if endpoint in ("sessions", "ui") and not is_loopback(request.remote):
            view.count_refusal(endpoint, "not_loopback")
            if endpoint == "ui":
                response = pages.render("refused.html", message=NOT_LOOPBACK)
                response.set_status(403)
                return response
            # google.rpc.Status PERMISSION_DENIED
            return web.json_response({"code": 7, "message": NOT_LOOPBACK}, status=403)
        return await handler(request)

    return check


@web.middleware
async def _store_unavailable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A read of the store that failed for want of it: 503 and Retry-After, with what failed
    (a status JSON for /v1, text for the pages), not a 500 and a traceback."""
    try:
        return await handler(request)
    except StoreUnavailable as err:
        headers = {"Retry-After": str(RETRY_AFTER)}
        if request.path.startswith("/v1/"):  # google.rpc.Status UNAVAILABLE
            return web.json_response({"code": 14, "message": str(err)}, status=503, headers=headers)
        return web.Response(text=f"503 Service Unavailable: {err}\n", status=503, headers=headers)


def app(
    view: StatusView,
    auth: BearerAuth | None = None,
    sessions_open: bool = False,
    trace_link: pages.TraceLink = lambda _trace_id: None,
    tls: bool = False,
) -> web.Application:
    """``sessions_open``: without ``auth``, serve /v1/sessions* and /ui/ to every client, not
    only loopback ones (ignored with ``auth``: the token guards them).  ``trace_link``: a
    trace id's URL in the operator's tracing backend (``status.trace_url``), or None.
    ``tls``: the listener is https (the login cookie is then Secure)."""
    bearer = listener_auth.Bearer(auth) if auth is not None else None

    async def metrics(_: web.Request) -> web.Response:
        view.refresh()
        return web.Response(
            body=generate_latest(view.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        state = view.state()
        if state != "ready":
            return web.json_response({"status": state}, status=503)
        return web.json_response({"status": "ready", "open_sessions": view.open_count()})

    async def session(request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        tenant = detail_tenant(request)
        live, revisions = await view.session(session_id, tenant)
        body: dict[str, object] = {"session_id": session_id}
        if tenant:
            body["tenant"] = tenant
        if live is not None:
            body["open"] = live
        if revisions:
            body["revisions"] = [{"records": records} for records in revisions]
        if live is None and not revisions:
            body["why_no_results"] = pages.UNKNOWN_SESSION
            return web.json_response(body, status=404)
        return web.json_response(body)

    async def sessions(request: web.Request) -> web.Response:
        try:
            query = session_query.parse(request.query)
        except session_query.BadParameter as err:
            return web.json_response({"code": 3, "message": str(err)}, status=400)  # INVALID_ARGUMENT
        scoped = held(request, query)
        if scoped is not None and scoped.state == "open":
            return web.json_response({"sessions": open_rows(view, scoped), "next_cursor": None})
        page = await view.sessions(scoped) if scoped is not None else SessionPage()
        return web.json_response({"sessions": page.rows, "next_cursor": page.next_cursor})

    async def no_login(_: web.Request) -> web.Response:  # nothing to log in to
        return web.Response(status=303, headers={"Location": "/ui/"})

    page_login = PageLogin(bearer, view, tls) if bearer is not None else None
    middlewares: list[Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]] = []
    if bearer is not None and page_login is not None:
        middlewares.append(
            listener_auth.middleware(bearer, _unauthenticated(view), _guarded, page_login.credentials)
        )
    elif not sessions_open:
        middlewares.append(_loopback_only(view))
    middlewares.append(_store_unavailable)
    application = web.Application(middlewares=middlewares)  # type: ignore[arg-type]
    application.router.add_get("/metrics", metrics)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/v1/sessions", sessions)
    application.router.add_get("/v1/sessions/{session_id}", session)
    application.router.add_get("/ui/login", page_login.form if page_login else no_login)
    application.router.add_post("/ui/login", page_login.login if page_login else no_login)
    application.router.add_post("/ui/logout", page_login.logout if page_login else no_login)
    application.add_routes(pages.routes(view, trace_link))
    return application
