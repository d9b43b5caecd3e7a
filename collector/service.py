"""The one place that knows the whole flow: ``build`` makes the chain from the config,
``Service`` runs it under ``skillgauge serve`` with its receivers and status extension.

    receivers -> [redact] -> spool -> sessions (detect) -> evaluate -> record -> export (fan-out)

Crash safety, in order of events:
  request spooled -> acknowledged -> session closes (revision, request range recorded)
  -> each judge verdict committed as it arrives -> exporters' outboxes committed -> coverage
  committed (the revision is done) -> outbox drained downstream.
A restart replays the store from the oldest request an unfinished session needs, skips
spans of revisions already done, finishes revisions that closed but were not done (reusing
committed verdicts: no second judge call), and drains what the outboxes still hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry

from collector import tenants
from collector.component import Retryable
from collector.config import Config
from collector.configtypes import size_text
from collector.detect.expectations import Rules
from collector.evaluate.judge import tenant_budgets
from collector.evaluate.metrics import EvaluateMetrics
from collector.evaluate.pending import StoredPending
from collector.evaluate.runner import Runner
from collector.export.fanout import Fanout
from collector.export.metrics import ExportMetrics
from collector.export.otlp import OtlpExporter
from collector.export.outbox import SpoolOutbox
from collector.gcclock import GC_CLOCK
from collector.gcpolicy import GC_POLICY
from collector.logsafety import escape_logs
from collector.otlp import shapes
from collector.otlp.received import Received
from collector.receiver import auth as listener_auth
from collector.receiver import grpc as grpc_receiver
from collector.receiver import http as http_receiver
from collector.receiver.config import Listener
from collector.receiver.connections import (
    RESERVED_FILES,
    AcceptErrors,
    CappedSite,
    ConnectionCap,
    fit_to_open_files,
    open_files_limit,
)
from collector.receiver.metrics import ReceiverMetrics
from collector.receiver.redact import redacting
from collector.sessions.metrics import SessionsMetrics
from collector.sessions.stage import SessionsStage
from collector.spool.metrics import SpoolMetrics
from collector.spool.stage import SpoolStage
from collector.startup_log import log_startup, log_status_up
from collector.state.facade import open_spool
from collector.state.lock import DataDirLock
from collector.state.metrics import CoverageMetrics
from collector.state.recorder import Recorder
from collector.state.types import Spool
from collector.status import extension as status
from collector.status.config import Status
from collector.status.metrics import StatusMetrics
from collector.status.readers import StatusReads
from collector.status.summary import Summary, every, log_periodically
from collector.status.view import SessionPage, SessionQuery, State
from collector.switching import SWITCHING
from collector.telemetry import CacheSizes, SkillLabels
from evaluators.evidence import session_key
from evaluators.result import EvaluationResult

log = logging.getLogger("skillgauge")
_MAX_CONNECTIONS = "receivers.otlp.http.max_connections"
_MAX_GRPC = "receivers.otlp.grpc.max_connections"
_MAX_STATUS = "status.max_connections"


class Chain:
    """The stages, built and linked; ``consume`` is the first stage's."""

    def __init__(self, config: Config, store: Spool | None = None) -> None:
        self.config = config
        self.registry = CollectorRegistry(auto_describe=True)  # every component's metrics
        skills = SkillLabels()
        skills.reserve([skill for rule in config.expectations for skill in rule.expect])
        self.status_metrics = StatusMetrics(self.registry)
        outbox_capacity = config.export.otlp.queue_size if config.export.otlp else 100_000
        self.store = store if store is not None else open_spool(config.storage, outbox_capacity)
        self.reads = StatusReads(self.store)  # the status API's, several at once
        self.fanout = Fanout()
        self.recorder = Recorder(self.store, CoverageMetrics(self.registry, skills), self.fanout)
        limits = config.tenant_limits
        budgets = tenant_budgets(tenants.usd_per_day(limits))
        self.runner = Runner(
            self.recorder,
            config,
            EvaluateMetrics(self.registry, skills),
            store=self._store_result,
            pending=StoredPending(self.store) if self.store.durable else None,
            tenant_budgets=budgets,
        )
        self.sessions_stage = SessionsStage(
            config.sessions,
            config.storage,
            Rules.compile(config.expectations, [s.name for s in self.runner.registry.skills.values()]),
            self.store,
            SessionsMetrics(self.registry),
            self.runner,
            tenants.max_open(limits),
        )
        assembler = self.sessions_stage.assembler
        self.tenants = tenants.TenantFigures(self.registry, limits, lambda: assembler.open_by_tenant, budgets)
        reopen_limit = config.sessions.reopen_cache_bytes
        early = assembler.early_logs
        CacheSizes(
            self.registry,
            {
                "reopen": lambda: (assembler.recent_bytes, reopen_limit, assembler.reopen_evicted),
                # log records held for a span yet to come; "evicted" ones were placed unheld
                "held_logs": lambda: (early.bytes, early.max_bytes, early.let_go_by_bound),
                # attribute key sets, and what is worked out from each; "evicted": not kept
                "key_shapes": shapes.size,
            },
        )
        GC_CLOCK.register(self.registry)
        self.spool = SpoolStage(
            self.store,
            self.sessions_stage,
            config.storage.max_bytes,
            self._admit_downstream,
            SpoolMetrics(self.registry),
            self.sessions_stage.check,
            self.sessions_stage.release,
            self.sessions_stage.room,
        )
        self.intake = redacting(self.spool, config.redact)  # before the spool sees a value
        self.ready = False
        self.draining = False
        self.runner.metrics.judge_configured.set(1 if config.judge.configured else 0)

    async def _store_result(self, result: EvaluationResult) -> None:
        session = session_key(result.tenant, result.session_id)
        await self.store.save_result(result.key, session, result.revision, result.to_dict())

    async def admit(self, tenant: str = "") -> None:
        """Raise ``Retryable`` when the chain cannot take a request from ``tenant`` now (at
        its own ``max_open_sessions`` first); else wait, for at most ``sessions.pending_wait``,
        while the queue to the assembler is full (``SessionsStage.room``)."""
        try:
            self.sessions_stage.assembler.admit_tenant(tenant)
        except Retryable as refusal:
            self.tenants.refused_open(tenant, refusal)
            raise
        await self.sessions_stage.room()
        self.spool.admit()

    def _admit_downstream(self) -> None:
        """The bounds past the spool: open sessions and requests waiting to be assembled,
        then judge work waiting (each raises ``Retryable``)."""
        self.sessions_stage.admit()
        self.runner.admit()

    async def consume(self, item: Received) -> None:
        await self.intake.consume(item)

    async def start(self) -> None:
        """Recover what a previous process left, then start closing sessions on time."""
        if self.store.durable:
            recovery = self.store.recovery()
            self.runner.recovered = dict(recovery.results)
            self.runner.pending_since = dict(recovery.pending)
            if recovery.pending:
                log.info(
                    "judge: %d evaluations waited for the judge before the restart; they are queued again",
                    len(recovery.pending),
                )
            await self.sessions_stage.recover(recovery)
        self.sessions_stage.start()
        self.runner.start()  # its judge work leased: renewed while it lives, others' taken over
        self.reads.publish_open(self.sessions_stage.open_sessions)  # for every replica's listing

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for evaluations in flight and their records."""
        await self.runner.drain(timeout)
        await self.recorder.drain(timeout)

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Close every open session (reason ``shutdown``), evaluate it, flush, stop."""
        self.draining = True
        await self.intake.shutdown(timeout)
        await self.store.shutdown(timeout)
        self.reads.close()

    # -- the status view ---------------------------------------------------------------------

    def state(self) -> State:
        if self.draining:
            return "draining"
        if not self.ready:
            return "starting"
        return "storage_unavailable" if self.store.faults.unavailable is not None else "ready"

    def open_count(self) -> int:
        return self.sessions_stage.assembler.open_count

    def refresh(self) -> None:
        self.sessions_stage.refresh()
        self.spool.refresh()

    async def session(self, session_id: str, tenant: str = "") -> tuple[dict[str, Any] | None, list[Any]]:
        await self.sessions_stage.settle()  # what was acknowledged is visible here
        key = session_key(tenant, session_id)
        live = self.sessions_stage.assembler.get(key)
        summary: dict[str, Any] | None = None
        if live is not None:
            _, closes_in, closes_by = self.sessions_stage.assembler.due(live)
            summary = {
                "revision": live.revision,
                "spans": live.spans,
                "skill_loads": self.sessions_stage.assembler.loads_so_far(key),
                "closes_in_seconds": round(closes_in, 1),
                "closes_by": closes_by,
                "also_closed_by": self._also_closed_by(),
                "replica": self.store.replica,
                "why_no_results": "the session is still open; it is evaluated when it closes "
                f"(idle {self.config.sessions.idle_timeout:g}s, max duration, end attribute or limits)",
            }
        return summary, await self.reads.revisions(key, self._not_before())

    def open_sessions(self, tenant: str | None = None) -> list[dict[str, Any]]:
        held = {"also_closed_by": self._also_closed_by(), "replica": self.store.replica}  # who holds it
        return self.reads.with_others(self.sessions_stage.open_sessions(tenant), tenant, held)

    def _also_closed_by(self) -> str:
        s = self.config.sessions
        return (
            f"a span with {s.end_attribute}=true, {s.max_spans} spans, {size_text(s.max_bytes)}, "
            f"or the service stopping"
        )

    async def sessions(self, query: SessionQuery) -> SessionPage:
        return await self.reads.sessions(query, self._not_before())

    async def overview(self, since: float, tenant: str | None = None) -> dict[str, Any]:
        return await self.reads.overview(since, self._not_before(), tenant)

    def _not_before(self) -> float:
        """Results evaluated before this are past ``storage.retention`` (the next checkpoint
        deletes them): never served."""
        return time.time() - self.config.storage.retention

    def count_refusal(self, endpoint: str, reason: str = "unauthenticated") -> None:
        self.status_metrics.status_rejected.labels(endpoint, reason).inc()


@dataclass
class Service:
    config: Config
    chain: Chain = field(init=False)
    ports: dict[str, int] = field(default_factory=dict)
    _grpc: grpc.aio.Server | None = None
    _runners: list[web.AppRunner] = field(default_factory=list)  # the OTLP/HTTP receiver's
    _status: web.AppRunner | None = None
    _lock: DataDirLock | None = None
    _summary: Summary | None = None
    _summary_task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        # Before the spool is opened: a second serve must not touch another's files.
        if self.config.storage.path != ":memory:":
            self._lock = DataDirLock(self.config.storage.path).acquire()
        try:
            self.chain = Chain(self.config)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let go of the data directory (also released when the process ends, however)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    async def start(self) -> None:
        chain = self.chain
        receivers = self.config.receivers.otlp
        receiver_metrics = ReceiverMetrics(chain.registry)
        answered = receiver_metrics.answered
        wanted = self.config.connection_caps
        caps, warnings = fit_to_open_files(wanted, open_files_limit(sum(wanted.values()) + RESERVED_FILES))
        for warning in warnings:
            log.warning("%s", warning)
        # The status API first: while a restart replays the spool (minutes, after a crash under
        # load), /healthz answers and /readyz says "starting", so that a liveness probe does not
        # kill the process mid-replay into the same replay again.
        status_cfg = self.config.status
        host, _, port = status_cfg.endpoint.rpartition(":")
        self._status, self.ports["status"] = await self._serve(
            status.app(
                chain,
                self.config.auth_for(status_cfg),
                status_cfg.sessions_open,
                status_cfg.trace_link,
                status_cfg.tls is not None,
            ),
            host.strip("[]"),
            int(port),
            "status.endpoint",
            tls=_tls(status_cfg),
            cap=ConnectionCap(
                caps[_MAX_STATUS],
                _MAX_STATUS,
                chain.status_metrics.connections,
                chain.status_metrics.connections_refused,
                "status API",
            ),
        )
        log_status_up(self.config, self.ports["status"])

        if self.config.export.otlp is not None:
            store = chain.store
            exporter = OtlpExporter(
                self.config.export.otlp,
                ExportMetrics(chain.registry),
                outbox=lambda signal: SpoolOutbox(store, f"otlp_{signal}"),
            )
            chain.fanout.exporters.append(exporter)
            await exporter.start()
        await chain.start()  # after the exporters: a restart re-exports through them
        if receivers.grpc is not None:
            self._grpc, self.ports["grpc"] = await grpc_receiver.start(
                receivers.grpc.model_copy(update={"max_connections": caps[_MAX_GRPC]}),
                chain.intake,
                answered("grpc"),
                self.config.auth_for(receivers.grpc),
                chain.admit,
            )
        if receivers.http is not None:
            runner, self.ports["http"] = await self._serve(
                http_receiver.app(
                    receivers.http,
                    chain.intake,
                    answered("http"),
                    self.config.auth_for(receivers.http),
                    chain.admit,
                ),
                receivers.http.host,
                receivers.http.port,
                "receivers.otlp.http.endpoint",
                auto_decompress=False,
                tls=_tls(receivers.http),
                # A connection that sends no complete request headers in time is closed.
                keepalive_timeout=receivers.http.read_timeout,
                cap=ConnectionCap(
                    caps[_MAX_CONNECTIONS],
                    _MAX_CONNECTIONS,
                    receiver_metrics.http_connections,
                    receiver_metrics.http_connections_refused,
                ),
            )
            self._runners.append(runner)
        chain.ready = True
        log_startup(self.config, self.ports, chain.store.durable, getattr(chain.store, "path", "?"))
        if self.config.status.summary_interval is not None:
            self._summary = Summary(chain.registry)
            self._summary_task = asyncio.create_task(
                log_periodically(self._summary, every(self.config.status.summary_interval), log),
                name="skillgauge-summary",
            )

    async def _serve(
        self,
        application: web.Application,
        host: str,
        port: int,
        field_name: str,
        auto_decompress: bool = True,
        tls: ssl.SSLContext | None = None,
        keepalive_timeout: float = 75.0,
        cap: ConnectionCap | None = None,
    ) -> tuple[web.AppRunner, int]:
        # The OTLP receiver inflates gzip itself, to enforce the size limit on the result.
        runner = web.AppRunner(
            application,
            access_log=None,
            handle_signals=False,
            auto_decompress=auto_decompress,
            keepalive_timeout=keepalive_timeout,
        )
        await runner.setup()
        site: web.BaseSite = (
            web.TCPSite(runner, host, port, reuse_address=True, ssl_context=tls)
            if cap is None
            else CappedSite(runner, host, port, cap, ssl_context=tls)
        )
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise OSError(
                f"{field_name}: cannot listen on {host}:{port} ({err.strerror or err}) - {_fix(err)}"
            ) from None
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return runner, int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop taking requests, close and evaluate every open session, flush, exit."""
        self.chain.draining = True
        await self._stop_receivers(timeout)
        await self.chain.shutdown(timeout)
        await self._last_summary()
        if self._status is not None:  # the status API answers until the end
            await self._status.cleanup()
        self.release()
        log.info("skillgauge stopped")

    async def _last_summary(self) -> None:
        # What the sessions closed at shutdown came to, in the same form as the periodic line.
        if self._summary_task is not None:
            self._summary_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._summary_task
        if self._summary is not None and (line := self._summary.line()) is not None:
            log.info("since the last summary: %s", line)

    async def abort(self) -> None:
        """After a failed start: close what did start, and keep every open session for the
        next start (nothing is closed or evaluated; the store is flushed)."""
        await self._stop_receivers(1.0)
        if self._status is not None:
            await self._status.cleanup()
        await self.chain.store.shutdown(5.0)
        self.release()

    async def _stop_receivers(self, timeout: float) -> None:
        if self._grpc is not None:
            await self._grpc.stop(grace=min(timeout, 5.0))
        for runner in self._runners:
            await runner.cleanup()


def _fix(err: OSError) -> str:
    """What to change when a listener cannot bind."""
    if err.errno == errno.EADDRINUSE:
        return "another process listens on that port: stop it, or choose another port"
    return "use an address of this host, e.g. 127.0.0.1 (this host only) or 0.0.0.0 (every interface)"


def _tls(listener: Listener | Status) -> ssl.SSLContext | None:
    return listener_auth.server_context(listener.tls) if listener.tls is not None else None


async def serve(config: Config) -> str | None:
    """Run until SIGTERM or SIGINT, then stop; None, or why storage still failed at the end
    (what stopping closed may not all be recorded: the next start evaluates it again).  A
    signal while starting (replaying the spool, which can take minutes) stops the start where
    it is, as a crash would, but with the store flushed: the next start replays it all."""
    escape_logs()
    SWITCHING.start()  # short, long while requests wait to be assembled (``collector.switching``)
    GC_POLICY.start_on(asyncio.get_running_loop())  # when garbage is collected (``collector.gcpolicy``)
    GC_CLOCK.start()  # the CPU time collections take (``skillgauge_gc_cpu_seconds_total``)
    asyncio.get_running_loop().set_exception_handler(AcceptErrors())
    service = Service(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.create_task(service.start(), name="skillgauge-start")
    signalled = asyncio.create_task(stop.wait(), name="skillgauge-signal")
    await asyncio.wait((starting, signalled), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        log.info("signal received while starting: stopping; the next start replays the spool again")
        await service.abort()
        log.info("skillgauge stopped")
        return service.chain.store.faults.unavailable
    signalled.cancel()
    try:
        starting.result()
    except BaseException:
        await service.abort()
        raise
    await stop.wait()
    log.info("signal received: draining")
    await service.stop()
    return service.chain.store.faults.unavailable
