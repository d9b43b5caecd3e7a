"""The status extension: /metrics, /healthz, /readyz, GET /v1/sessions (the query API) and
GET /v1/sessions/{id}, beside the chain (it reads a ``StatusView``).

With auth configured, /metrics and /v1/sessions* need the bearer token (sessions hold what
agents said); /healthz and /readyz stay open, because Kubernetes probes send no credentials
and say nothing about any session.  Without auth, /v1/sessions* answers loopback clients
only (127.0.0.0/8, ::1) unless ``status.sessions_open: true``; others get 403.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from collector.receiver import auth as listener_auth
from collector.receiver.config import BearerAuth
from collector.status import query as session_query
from collector.status.view import StatusView

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
NOT_LOOPBACK = (
    "/v1/sessions answers only clients on this host (loopback) while no auth is configured: "
    "configure a bearer token (auth), or set status.sessions_open: true to serve every client"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(path: str) -> bool:
    return path not in OPEN_PATHS


def _sessions_path(path: str) -> bool:
    return path == "/v1/sessions" or path.startswith("/v1/sessions/")


def _unauthenticated(view: StatusView) -> listener_auth.Refusal:
    def refuse(request: web.Request) -> web.Response:
        path = request.path
        endpoint = "metrics" if path == "/metrics" else "sessions" if _sessions_path(path) else ""
        if endpoint:  # other paths would be 404s: not worth a series
            view.count_refusal(endpoint)
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
        if _sessions_path(request.path) and not is_loopback(request.remote):
            view.count_refusal("sessions", "not_loopback")
            # google.rpc.Status PERMISSION_DENIED
            return web.json_response({"code": 7, "message": NOT_LOOPBACK}, status=403)
        return await handler(request)

    return check


def app(view: StatusView, auth: BearerAuth | None = None, sessions_open: bool = False) -> web.Application:
    """``sessions_open``: without ``auth``, serve /v1/sessions* to every client, not only
    loopback ones (ignored with ``auth``: the token guards them)."""

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
        live, revisions = await view.session(session_id)
        body: dict[str, object] = {"session_id": session_id}
        if live is not None:
            body["open"] = live
        if revisions:
            body["revisions"] = [{"records": records} for records in revisions]
        if live is None and not revisions:
            body["why_no_results"] = (
                "unknown session: no span has carried this id, or its results are older than "
                "storage.retention"
            )
            return web.json_response(body, status=404)
        return web.json_response(body)

    async def sessions(request: web.Request) -> web.Response:
        try:
            query = session_query.parse(request.query)
        except session_query.BadParameter as err:
            return web.json_response({"code": 3, "message": str(err)}, status=400)  # INVALID_ARGUMENT
        page = await view.sessions(query)
        return web.json_response({"sessions": page.rows, "next_cursor": page.next_cursor})

    middlewares: list[Handler | Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]] = []
    if auth is not None:
        bearer = listener_auth.Bearer(auth)
        middlewares.append(listener_auth.middleware(bearer, _unauthenticated(view), _guarded))
    elif not sessions_open:
        middlewares.append(_loopback_only(view))
    application = web.Application(middlewares=middlewares)  # type: ignore[arg-type]
    application.router.add_get("/metrics", metrics)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/v1/sessions", sessions)
    application.router.add_get("/v1/sessions/{session_id}", session)
    return application
