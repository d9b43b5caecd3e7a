"""The status API: /metrics, /healthz, /readyz and GET /v1/sessions/{id}.

With auth configured, /metrics and /v1/sessions/{id} need the bearer token (sessions hold
what agents said); /healthz and /readyz stay open, because Kubernetes probes send no
credentials and say nothing about any session.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from collector.pipeline import Pipeline
from collector.receiver import auth as listener_auth
from collector.receiver.config import BearerAuth

OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _guarded(path: str) -> bool:
    return path not in OPEN_PATHS


def _unauthenticated(pipeline: Pipeline) -> listener_auth.Refusal:
    def refuse(request: web.Request) -> web.Response:
        path = request.path
        endpoint = "metrics" if path == "/metrics" else "sessions" if path.startswith("/v1/sessions/") else ""
        if endpoint:  # other paths would be 404s: not worth a series
            pipeline.metrics.status_rejected.labels(endpoint, "unauthenticated").inc()
        # The shape of a google.rpc.Status in JSON, as the OTLP/HTTP receiver answers.
        return web.json_response({"code": 16, "message": listener_auth.MESSAGE}, status=401)

    return refuse


def app(pipeline: Pipeline, ready: Callable[[], bool], auth: BearerAuth | None = None) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        pipeline.tick_gauges()
        return web.Response(
            body=generate_latest(pipeline.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        if pipeline.draining:
            return web.json_response({"status": "draining"}, status=503)
        if not ready():
            return web.json_response({"status": "starting"}, status=503)
        return web.json_response({"status": "ready", "open_sessions": pipeline.assembler.open_count})

    async def session(request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        await pipeline.settle()  # what was acknowledged is visible here
        revisions = pipeline.store.get(session_id)
        live = pipeline.assembler.get(session_id)
        body: dict[str, object] = {"session_id": session_id}
        if live is not None:
            body["open"] = {
                "revision": live.revision,
                "spans": live.spans,
                "skill_loads": pipeline.assembler.loads_so_far(session_id),
                "why_no_results": "the session is still open; it is evaluated when it closes "
                f"(idle {pipeline.config.sessions.idle_timeout:g}s, max duration, end attribute or limits)",
            }
        if revisions:
            body["revisions"] = [{"records": records} for records in revisions]
        if live is None and not revisions:
            body["why_no_results"] = (
                "unknown session: no span has carried this id since start-up, or its results were "
                f"evicted (the status API keeps the last {pipeline.store.capacity} sessions)"
            )
            return web.json_response(body, status=404)
        return web.json_response(body)

    middlewares = []
    if auth is not None:
        bearer = listener_auth.Bearer(auth)
        middlewares.append(listener_auth.middleware(bearer, _unauthenticated(pipeline), _guarded))
    application = web.Application(middlewares=middlewares)
    application.router.add_get("/metrics", metrics)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/v1/sessions/{session_id}", session)
    return application
