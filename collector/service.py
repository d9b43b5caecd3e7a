"""``skillgauge serve``: start the receivers and the status API around one pipeline, and
drain cleanly on SIGTERM / SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field

import grpc
from aiohttp import web

from collector import __version__
from collector.config import Config
from collector.export import status
from collector.export.otlp import OtlpExporter
from collector.pipeline import Pipeline
from collector.receiver import grpc as grpc_receiver
from collector.receiver import http as http_receiver
from collector.sessions.spool import MemorySpool

log = logging.getLogger("skillgauge")


@dataclass
class Service:
    config: Config
    pipeline: Pipeline = field(init=False)
    ports: dict[str, int] = field(default_factory=dict)
    _grpc: grpc.aio.Server | None = None
    _runners: list[web.AppRunner] = field(default_factory=list)
    _ready: bool = False

    def __post_init__(self) -> None:
        self.pipeline = Pipeline(self.config)

    async def start(self) -> None:
        pipeline = self.pipeline
        receivers = self.config.receivers.otlp
        metrics = pipeline.metrics

        def answered(protocol: str):  # type: ignore[no-untyped-def]
            def on_answer(signal_name: str, outcome: str, reason: str) -> None:
                metrics.requests.labels(protocol, signal_name, outcome).inc()
                if reason:
                    metrics.rejected_requests.labels(protocol, signal_name, reason).inc()

            return on_answer

        await pipeline.start()
        if self.config.export.otlp is not None:
            exporter = OtlpExporter(self.config.export.otlp, metrics)
            pipeline.sinks.append(exporter)
            await exporter.start()
        if receivers.grpc is not None:
            self._grpc, self.ports["grpc"] = await grpc_receiver.start(
                receivers.grpc, pipeline.consume, answered("grpc")
            )
        if receivers.http is not None:
            self.ports["http"] = await self._serve(
                http_receiver.app(receivers.http, pipeline.consume, answered("http")),
                receivers.http.host,
                receivers.http.port,
                "receivers.otlp.http.endpoint",
                auto_decompress=False,
            )
        status_cfg = self.config.status
        host, _, port = status_cfg.endpoint.rpartition(":")
        self.ports["status"] = await self._serve(
            status.app(pipeline, lambda: self._ready), host.strip("[]"), int(port), "status.endpoint"
        )
        self._ready = True
        self._log_startup()

    async def _serve(
        self,
        application: web.Application,
        host: str,
        port: int,
        field_name: str,
        auto_decompress: bool = True,
    ) -> int:
        # The OTLP receiver inflates gzip itself, to enforce the size limit on the result.
        runner = web.AppRunner(
            application, access_log=None, handle_signals=False, auto_decompress=auto_decompress
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise OSError(f"{field_name}: cannot listen on {host}:{port} ({err.strerror})") from None
        self._runners.append(runner)
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    def _log_startup(self) -> None:
        cfg = self.config
        parts = []
        if "grpc" in self.ports:
            parts.append(
                f"OTLP/gRPC {_host(cfg.receivers.otlp.grpc.endpoint)}:{self.ports['grpc']}"  # type: ignore[union-attr]
                " (TraceService, LogsService)"
            )
        if "http" in self.ports:
            parts.append(
                f"OTLP/HTTP {_host(cfg.receivers.otlp.http.endpoint)}:{self.ports['http']}"  # type: ignore[union-attr]
                " (/v1/traces, /v1/logs)"
            )
        parts.append(
            f"status {_host(cfg.status.endpoint)}:{self.ports['status']} (/metrics, /healthz, /readyz, /v1/sessions/{{id}})"
        )
        log.info("skillgauge %s listening: %s", __version__, "; ".join(parts))
        if isinstance(self.pipeline.spool, MemorySpool):
            log.warning('storage.path is ":memory:": spans are NOT durable; a crash loses open sessions')
        else:
            log.info(
                "spool: %s (acknowledged spans survive a crash)", getattr(self.pipeline.spool, "path", "?")
            )
        s = cfg.sessions
        log.info(
            "sessions: keys %s; close after %gs idle, %gs max, %d spans, end attribute %s",
            ", ".join(s.keys),
            s.idle_timeout,
            s.max_duration,
            s.max_spans,
            s.end_attribute,
        )
        if cfg.export.otlp is not None:
            otlp = cfg.export.otlp
            log.info(
                "export: evaluation spans%s to %s over OTLP/%s; results wait in an in-memory outbox "
                "(up to %d) while the downstream is unavailable",
                " and gen_ai.evaluation.result log records" if otlp.logs else "",
                otlp.endpoint,
                "gRPC" if otlp.protocol == "grpc" else "HTTP",
                otlp.queue_size,
            )
        else:
            log.info("export: no export.otlp endpoint; results are on /metrics and /v1/sessions/{id} only")
        if cfg.judge.configured:
            log.info("judge: %s via %s", cfg.judge.model, cfg.judge.base_url or "api.anthropic.com")
        else:
            log.warning(
                "judge: NOT configured (no ANTHROPIC_API_KEY / judge.api_key or judge.base_url): "
                "judge evaluators will be reported as skipped/no_judge_configured"
            )

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop taking requests, close and evaluate every open session, flush, exit."""
        self.pipeline.draining = True
        if self._grpc is not None:
            await self._grpc.stop(grace=min(timeout, 5.0))
        for runner in self._runners[:-1]:  # receivers first; the status API answers until the end
            await runner.cleanup()
        await self.pipeline.shutdown(timeout)
        if self._runners:
            await self._runners[-1].cleanup()
        log.info("skillgauge stopped")


def _host(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


async def serve(config: Config) -> None:
    service = Service(config)
    await service.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("signal received: draining")
    await service.stop()
