"""The status extension: /metrics, /healthz, /readyz and GET /v1/sessions/{id}, beside the
chain (it reads a ``StatusView``).

With auth configured, /metrics and /v1/sessions/{id} need the bearer token (sessions hold
what agents said); /healthz and /readyz stay open, because Kubernetes probes send no
credentials and say nothing about any session.

Tenants: a token reads only the sessions of its own tenant.  ``/v1/sessions/{id}`` of
another tenant's session answers 404, as for an unknown id, so ids do not leak.  An
operator's token (``tenant: "*"``) reads any tenant's, naming it as ``?tenant=team-a``
(the default tenant without it).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from collector.receiver import auth as listener_auth
from collector.receiver.config import ALL_TENANTS, BearerAuth
from collector.status.view import StatusView

OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _guarded(path: str) -> bool:
    return path not in OPEN_PATHS


def tenant_read(request: web.Request) -> str:
    """The tenant whose sessions a status request reads: its token's (``""`` without auth);
    for an operator's token, the ``tenant`` query parameter's."""
    tenant = str(request.get(listener_auth.TENANT, ""))
    return request.query.get("tenant", "") if tenant == ALL_TENANTS else tenant


def _unauthenticated(view: StatusView) -> listener_auth.Refusal:
    def refuse(request: web.Request) -> web.Response:
        path = request.path
        endpoint = "metrics" if path == "/metrics" else "sessions" if path.startswith("/v1/sessions/") else ""
        if endpoint:  # other paths would be 404s: not worth a series
            view.count_refusal(endpoint)
        # The shape of a google.rpc.Status in JSON, as the OTLP/HTTP receiver answers.
        return web.json_response({"code": 16, "message": listener_auth.MESSAGE}, status=401)

    return refuse


def app(view: StatusView, auth: BearerAuth | None = None) -> web.Application:
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
        tenant = tenant_read(request)
        live, revisions = await view.session(session_id, tenant)
        body: dict[str, object] = {"session_id": session_id}
        if tenant:
            body["tenant"] = tenant
        if live is not None:
            body["open"] = live
        if revisions:
            body["revisions"] = [{"records": records} for records in revisions]
        if live is None and not revisions:
            body["why_no_results"] = (
                "unknown session: no span has carried this id since start-up, or its results were "
                f"evicted (the status API keeps the last {view.results_capacity} sessions)"
            )
            return web.json_response(body, status=404)
        return web.json_response(body)

    middlewares = []
    if auth is not None:
        bearer = listener_auth.Bearer(auth)
        middlewares.append(listener_auth.middleware(bearer, _unauthenticated(view), _guarded))
    application = web.Application(middlewares=middlewares)
    application.router.add_get("/metrics", metrics)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/v1/sessions/{session_id}", session)
    return application
