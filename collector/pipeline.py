"""Wires receiver -> spool -> assembler -> evaluators -> results store and metrics.

One asyncio loop owns the flow.  Receivers call ``consume``; it admits the request (or
answers with backpressure), commits it to the spool, and only then feeds the assembler and
acknowledges.  Closed sessions are evaluated as they close.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal, Protocol

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import Config
from collector.detect.expectations import Rules
from collector.export.metrics import Metrics
from collector.export.store import ResultStore
from collector.runner import Runner
from collector.sessions.assembler import Accepted, Assembler
from collector.sessions.spool import Spool, open_spool
from evaluators.evidence import Session
from evaluators.result import Coverage

log = logging.getLogger("skillgauge")

Signal = Literal["traces", "logs"]


@dataclass(frozen=True, slots=True)
class Received:
    signal: Signal
    request: Message
    protocol: str  # grpc | http | replay


class ResultSink(Protocol):
    """Receives every finished session account.  Must not block the event loop."""

    def consume(self, coverage: Coverage) -> None: ...

    async def shutdown(self, timeout: float = 10.0) -> None: ...


class Pipeline:
    def __init__(self, config: Config, spool: Spool | None = None, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.spool = spool if spool is not None else open_spool(config.storage.path)
        self.store = ResultStore()
        self.assembler = Assembler(config.sessions, self._on_close, rules=Rules.compile(config.expectations))
        self.runner = Runner(self._deliver, config, self.metrics)
        self.sinks: list[ResultSink] = []  # exporters; each gets every finished Coverage
        self.closed: list[Coverage] = []  # kept only when ``keep_closed`` (replay)
        self.keep_closed = False
        self.draining = False
        self._ticker: asyncio.Task[None] | None = None
        self._reopened_seen = 0
        self.metrics.judge_configured.set(1 if config.judge.configured else 0)

    # -- intake ---------------------------------------------------------------------------

    async def consume(self, item: Received) -> Accepted:
        """Admit, spool, assemble.  Raises ``ReceiveError`` subclasses for OTLP answers."""
        self.assembler.admit()
        await self.spool.append(item.signal, item.request.SerializeToString())
        return self.assemble(item)

    def assemble(self, item: Received) -> Accepted:
        if item.signal == "traces":
            assert isinstance(item.request, ExportTraceServiceRequest)
            result = self.assembler.add_spans(item.request)
        else:
            assert isinstance(item.request, ExportLogsServiceRequest)
            result = self.assembler.add_logs(item.request)
        self.metrics.received.labels(item.signal, item.protocol).inc(result.accepted)
        if result.rejected:
            self.metrics.rejected.labels(item.signal, "invalid_item").inc(result.rejected)
        self.metrics.sessions_open.set(self.assembler.open_count)
        return result

    # -- closing and evaluating -----------------------------------------------------------

    def _on_close(self, session: Session, reason: str) -> None:
        self.metrics.sessions_closed.labels(reason).inc()
        self.runner.submit(session)

    def _deliver(self, coverage: Coverage, lag: float) -> None:
        """A session's evaluation is complete: record it and pass it to every sink."""
        self.store.add(coverage)
        if self.keep_closed:
            self.closed.append(coverage)
        self.metrics.session_evaluated(coverage.session, coverage.results, lag)
        for sink in self.sinks:
            sink.consume(coverage)
        log.debug("session %r evaluated: %d results", coverage.session.session_id, len(coverage.results))

    def tick(self) -> None:
        self.assembler.close_due()
        self.tick_gauges()

    def tick_gauges(self) -> None:
        self.metrics.sessions_open.set(self.assembler.open_count)
        reopened, self._reopened_seen = self.assembler.reopened - self._reopened_seen, self.assembler.reopened
        if reopened:
            self.metrics.sessions_reopened.inc(reopened)
        self.metrics.spool_bytes.set(self.spool.size_bytes())

    async def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick_forever(), name="skillgauge-ticker")

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.sessions.check_interval)
            try:
                self.tick()
            except Exception:  # a bug here must not stop sessions from closing forever
                log.exception("session tick failed")

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Close every open session (reason ``shutdown``), evaluate it, flush the spool."""
        self.draining = True
        if self._ticker is not None:
            self._ticker.cancel()
        closed = self.assembler.close_all("shutdown")
        self.metrics.sessions_open.set(0)
        await self.runner.drain(timeout)
        await self.runner.close()
        log.info("shutdown: closed and evaluated %d open sessions", closed)
        for sink in self.sinks:
            await sink.shutdown(timeout)
        await self.spool.shutdown(timeout)
