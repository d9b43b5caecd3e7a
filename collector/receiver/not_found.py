"""Requests to a path or method the receivers do not serve: answered as before (HTTP 404 /
405, gRPC UNIMPLEMENTED), and now counted and logged.

Each is counted in ``skillgauge_rejected_requests_total{reason="not_found"}`` and logged at
warning at most once per ``EVERY`` seconds per method and path, with the path and a hint (a wrong
path is nearly always an exporter's endpoint written without, or with the wrong, ``/v1/...``
suffix, or metrics sent to a receiver that takes traces and logs only).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from aiohttp import web

from collector.receiver.types import OnAnswer
from collector.telemetry import RateLimitedLog

log = logging.getLogger("skillgauge")
EVERY = 60.0
REASON = "not_found"
HTTP_PATHS = ("/v1/traces", "/v1/logs")
GRPC_METHODS = (
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
)
_METRICS = "skillgauge takes traces and logs, not metrics: send the metrics elsewhere (an OpenTelemetry Collector in front can split them)"


def hint(path: str, method: str = "POST") -> str:
    """What the sender most likely meant, for the log line and the answer."""
    served = GRPC_METHODS if path.startswith("/opentelemetry.") else HTTP_PATHS
    if "metric" in path.lower():
        return _METRICS
    if path in served:
        return f"{path} takes POST, not {method}"
    close = difflib.get_close_matches(path, served, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}"
    return f"the receiver serves {' and '.join(served)}; an exporter's endpoint must name the full path"


def signal_of(path: str) -> str:
    """The signal a refused path was meant for, as a bounded label value."""
    lowered = path.lower()
    for signal in ("traces", "logs", "metrics"):
        if signal[:-1] in lowered:  # trace, log, metric
            return signal
    return "unknown"


class NotFound:
    """Counts and logs the refusals of one protocol's receiver: each method and path at
    most once per ``every`` seconds (the first ``MAX_PATHS`` of them; any others share one
    limit, so a scan of many paths cannot flood the log)."""

    MAX_PATHS = 64

    def __init__(self, protocol: str, on_answer: OnAnswer, every: float = EVERY) -> None:
        self.protocol = protocol
        self._on_answer = on_answer
        self._every = every
        self._logs: dict[tuple[str, str], RateLimitedLog] = {}
        self._others = RateLimitedLog(log, logging.WARNING, every)

    def refused(self, path: str, method: str = "POST") -> str:
        """Count and (rate-limited) log one refused request; returns its hint."""
        said = hint(path, method)
        self._on_answer(signal_of(path), "error", REASON)
        key = (method[:16], path[:200])
        limit = self._logs.get(key)
        if limit is None and len(self._logs) < self.MAX_PATHS:
            limit = self._logs[key] = RateLimitedLog(log, logging.WARNING, self._every)
        (limit or self._others)("%s receiver: no such endpoint %s %r - %s", self.protocol, *key, said)
        return said


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def http_middleware(not_found: NotFound) -> Any:
    """aiohttp middleware: a 404 or 405 of the router is counted and logged, and its body
    says the hint."""

    @web.middleware
    async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as refused:
            said = not_found.refused(request.path, request.method)
            refused.text = f"{refused.status} {refused.reason}: {said}\n"
            raise

    return count


class GrpcFallback(grpc.GenericRpcHandler):  # type: ignore[misc]
    """The last generic handler: any method no service claimed is counted and answered
    UNIMPLEMENTED with the hint."""

    def __init__(self, not_found: NotFound) -> None:
        self._not_found = not_found

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = str(handler_call_details.method)
        not_found = self._not_found

        async def refuse(_: bytes, context: grpc.aio.ServicerContext) -> bytes:
            said = not_found.refused(method, "gRPC")
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"no such method {method}: {said}")
            return b""

        return grpc.unary_unary_rpc_method_handler(refuse)
