"""Wires receiver -> spool -> assembler -> runner -> sinks (outbox, exporters) and metrics.

One asyncio loop owns the flow.  Receivers (on a loop of their own under ``serve``) call
``consume``: it admits the request (or answers with backpressure), checks which spans are
usable, commits the request to the spool and acknowledges; one task then feeds spooled
trace requests to the assembler in arrival order, so an Export's latency is the commit, not
detection (the queue between the two is bounded: ``sessions.max_pending_requests``).  Log
requests are assembled before their answer, because whether a record can be used depends
on its session key.  The assembler hands each item to the detection stage: in this process,
or under ``serve`` in a worker process (``collector.detect.worker``, its own queue bounded
the same way), which delivers each closed session back here.  Closed sessions are evaluated
as they are delivered; a finished evaluation is queued durably by every sink, then
recorded as done.

Crash safety, in order of events:
  request spooled -> acknowledged -> session closes (revision, request range recorded)
  -> each judge verdict committed as it arrives -> sinks' outboxes committed -> coverage
  committed (the revision is done) -> outbox drained downstream.
A restart replays the spool from the oldest request an unfinished session needs, skips
spans of revisions already done, finishes revisions that closed but were not done (reusing
committed verdicts: no second judge call), and drains what the outboxes still hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.config import Config
from collector.detect.expectations import Rules
from collector.evaluate.runner import Runner
from collector.export.metrics import Metrics
from collector.receiver.errors import Backpressure
from collector.sessions.assembler import Accepted, Assembler, check_spans
from collector.state.results import ResultStore
from collector.state.store import Closed, Recorded, Recovery, Spool, encode_record, open_spool
from evaluators.evidence import Session
from evaluators.result import Coverage, EvaluationResult

log = logging.getLogger("skillgauge")
_CLOSE_BATCH = 8  # sessions closed (and planned for evaluation) per event-loop turn
_RECORD_BATCH = 64  # evaluated sessions per spool transaction (~2 ms of the loop)

Signal = Literal["traces", "logs"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Received:
    signal: Signal
    request: Message
    protocol: str  # grpc | http | replay
    raw: bytes | None = None  # the request's protobuf bytes as received: spooled as they are


class ResultSink(Protocol):
    """Receives every finished session account."""

    async def consume(self, coverage: Coverage) -> None:
        """Return once the results are queued durably (or at once, for a sink with no queue)."""
        ...

    async def shutdown(self, timeout: float = 10.0) -> None: ...


class Pipeline:
    def __init__(
        self,
        config: Config,
        spool: Spool | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        outbox_capacity = config.export.otlp.queue_size if config.export.otlp else 100_000
        self.spool = spool if spool is not None else open_spool(config.storage.path, outbox_capacity)
        self.store = ResultStore()
        self.assembler = Assembler(
            config.sessions,
            self._on_close,
            rules=Rules.compile(config.expectations),
            on_record=self._on_record,
        )
        self.runner = Runner(self._deliver, config, self.metrics, store=self._store_result)
        self.sinks: list[ResultSink] = []  # exporters; each gets every finished Coverage
        self.closed: list[Coverage] = []  # kept only when ``keep_closed`` (replay)
        self.keep_closed = False
        self.draining = False
        self._ticker: asyncio.Task[None] | None = None
        self._recording: set[asyncio.Task[None]] = set()  # checkpoints
        self._to_record: deque[tuple[Coverage, float]] = deque()  # evaluated, waiting for ``_recorder``
        self._recorder: asyncio.Task[None] | None = None
        self._pending: deque[tuple[Received, int]] = deque()  # spooled, acknowledged, not assembled
        self._assembling = False
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._unfinished: dict[tuple[str, int], int] = {}  # closed, not yet recorded -> first request
        self._last_request = 0
        self._spool_bytes = 0
        self._checkpointed_at = 0.0
        self._reopened_seen = 0
        self.metrics.judge_configured.set(1 if config.judge.configured else 0)

    # -- intake ---------------------------------------------------------------------------

    def admit(self) -> None:
        """Raise ``Backpressure`` when a bound is reached; nothing has been taken yet."""
        self.assembler.admit()
        bound = self.config.sessions.max_pending_requests
        if len(self._pending) >= bound:
            raise Backpressure(
                f"{len(self._pending)} requests wait to be assembled (sessions.max_pending_requests); retry later",
                retry_after=1.0,
            )
        if self._spool_bytes > self.config.storage.max_bytes:
            raise Backpressure(
                f"the spool holds {self._spool_bytes} bytes (storage.max_bytes); retry later",
                retry_after=10.0,
            )

    async def consume(self, item: Received) -> Accepted:
        """Admit, spool, acknowledge.  Raises ``ReceiveError`` subclasses for OTLP answers.

        Receivers may call this from their own event loop (``collector.receiver.loop``): the
        request is spooled from there, and handed to the pipeline's loop once committed."""
        self.admit()
        raw = item.raw if item.raw is not None else item.request.SerializeToString()
        if item.signal == "logs":
            request_id = await self.spool.append(item.signal, raw)
            self._last_request = max(self._last_request, request_id)
            return self.assemble(item, request_id)
        assert isinstance(item.request, ExportTraceServiceRequest)
        checked = check_spans(item.request)
        request_id = await self.spool.append(item.signal, raw)
        self._enqueue(item, request_id)
        self._count(item, checked)
        return checked

    def _enqueue(self, item: Received, request_id: int) -> None:
        self._last_request = max(self._last_request, request_id)
        self._pending.append((item, request_id))
        self._wake.set()
        self._start_worker()

    def _start_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._assemble_forever(), name="skillgauge-assembler")

    async def _assemble_forever(self) -> None:
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            item, request_id = self._pending[0]
            self._assembling = True
            try:
                assert isinstance(item.request, ExportTraceServiceRequest)
                for _ in self.assembler.feed(item.request, request_id, Accepted(), raw=item.raw):
                    await asyncio.sleep(0)  # acknowledgements need not wait for a whole request
            except Exception:  # one bad request must not stop assembly for everyone
                log.exception("assembling spooled request %d failed", request_id)
            finally:
                self._pending.popleft()
                self._assembling = False
            self.metrics.sessions_open.set(self.assembler.open_count)

    async def settle(self) -> None:
        """Wait until every acknowledged request has been assembled (read-your-writes)."""
        while self._pending or self._assembling:
            self._start_worker()
            await asyncio.sleep(0.001)

    def assemble(self, item: Received, request_id: int = 0, *, admit: bool = True) -> Accepted:
        if item.signal == "traces":
            assert isinstance(item.request, ExportTraceServiceRequest)
            result = self.assembler.add_spans(item.request, request_id, admit=admit, raw=item.raw)
        else:
            assert isinstance(item.request, ExportLogsServiceRequest)
            result = self.assembler.add_logs(item.request, request_id, admit=admit, raw=item.raw)
        self._count(item, result)
        self.metrics.sessions_open.set(self.assembler.open_count)
        return result

    def _count(self, item: Received, result: Accepted) -> None:
        self.metrics.received.labels(item.signal, item.protocol).inc(result.accepted)
        if result.rejected:
            self.metrics.rejected.labels(item.signal, "invalid_item").inc(result.rejected)

    # -- closing and evaluating -----------------------------------------------------------

    def _on_record(self, closed: Closed) -> None:
        self.spool.record_closed(closed)
        self._unfinished[(closed.session, closed.revision)] = closed.first_request

    def _on_close(self, session: Session, reason: str) -> None:
        self.metrics.session_closed(reason)
        self.runner.submit(session)

    async def _store_result(self, result: EvaluationResult) -> None:
        await self.spool.save_result(result.key, result.session_id, result.revision, result.to_dict())

    def _deliver(self, coverage: Coverage, lag: float) -> None:
        """A session's evaluation is complete: queue it in every sink, then record it done.
        Sessions delivered while a batch is being recorded wait for the next one: one task
        and one spool transaction for all (a task and a commit for each session cost ~15 us)."""
        self._to_record.append((coverage, lag))
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.create_task(self._record_waiting(), name="skillgauge-record")

    async def _record_waiting(self) -> None:
        waiting = self._to_record
        while waiting:  # a bounded batch at a time: the loop's other work waits for each
            await self._record([waiting.popleft() for _ in range(min(len(waiting), _RECORD_BATCH))])

    async def _record(self, batch: list[tuple[Coverage, float]]) -> None:
        ready: list[tuple[Coverage, float, Recorded]] = []
        for coverage, lag in batch:
            session = coverage.session
            try:
                for sink in self.sinks:
                    await sink.consume(coverage)
                records = [encode_record(r.to_dict()) for r in coverage.results]
                ready.append(
                    (
                        coverage,
                        lag,
                        (session.session_id, session.revision, records, encode_record(coverage.to_dict())),
                    )
                )
            except Exception:  # the revision stays unfinished: a restart evaluates it again
                log.exception("recording session %r revision %d failed", session.session_id, session.revision)
        try:
            await self.spool.save_coverage([recorded for _, _, recorded in ready])
        except Exception:  # as above, for every revision of the batch
            log.exception("recording %d evaluated sessions failed", len(ready))
            return
        for coverage, lag, (session_id, revision, records, summary) in ready:
            self._unfinished.pop((session_id, revision), None)
            self.store.add(session_id, records, summary)
            if self.keep_closed:
                self.closed.append(coverage)
            self.metrics.session_evaluated(coverage.session, coverage.results, lag)
            log.debug("session %r evaluated: %d results", session_id, len(coverage.results))

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for sessions being finished, evaluations in flight and their records."""
        await self.runner.drain(timeout)
        waiting = set(self._recording) | ({self._recorder} if self._recorder is not None else set())
        if waiting:
            await asyncio.wait(waiting, timeout=timeout)

    # -- restart ---------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild what a previous process left: open sessions, unfinished revisions."""
        if not self.spool.durable:
            return
        started = time.monotonic()
        recovery = self.spool.recovery()
        self.runner.recovered = dict(recovery.results)
        unfinished = self._prepare(recovery)
        requests = spans = 0
        for request_id, signal, payload in self.spool.requests(recovery.replay_from):
            while unfinished and unfinished[0].last_request < request_id:
                done = unfinished.pop(0)
                self.assembler.close(done.session, done.reason)
            kind: Signal = "traces" if signal == "traces" else "logs"
            request = ExportTraceServiceRequest() if kind == "traces" else ExportLogsServiceRequest()
            request.ParseFromString(payload)
            spans += self.assemble(Received(kind, request, "spool"), request_id, admit=False).accepted
            self._last_request = request_id
            requests += 1
            if requests % 200 == 0:
                await asyncio.sleep(0)  # let signals and timers run during a long replay
        for done in unfinished:
            self.assembler.close(done.session, done.reason)
        self.assembler.skip = None
        log.log(
            logging.INFO if requests or recovery.closed else logging.DEBUG,
            "recovered from the spool in %.1fs: %d requests (%d items) replayed, %d sessions open, "
            "%d closed revisions re-evaluated, %d judge verdicts reusable",
            time.monotonic() - started,
            requests,
            spans,
            self.assembler.open_count,
            len(self._unfinished),
            len(recovery.results),
        )

    def _prepare(self, recovery: Recovery) -> list[Closed]:
        """Set revisions and the skip rule; return revisions to finish, in request order."""
        done: dict[str, list[Closed]] = {}
        by_trace: dict[bytes, list[Closed]] = {}
        unfinished: list[Closed] = []
        for session, revisions in recovery.closed.items():
            for closed in revisions:
                if (session, closed.revision) in recovery.evaluated:
                    done.setdefault(session, []).append(closed)
                    for trace in closed.traces:
                        by_trace.setdefault(bytes.fromhex(trace), []).append(closed)
                    self.assembler.seed_revision(session, closed.revision)
                else:
                    unfinished.append(closed)
        for closed in unfinished:
            self.assembler.seed_revision(closed.session, closed.revision - 1)

        def skip(key: str | None, trace_id: bytes, request_id: int) -> bool:
            revisions = done.get(key, ()) if key is not None else by_trace.get(trace_id, ())
            return any(c.first_request <= request_id <= c.last_request for c in revisions)

        self.assembler.skip = skip
        return sorted(unfinished, key=lambda c: c.last_request)

    # -- housekeeping ----------------------------------------------------------------------

    def tick(self) -> None:
        self.assembler.close_due()
        self.tick_gauges()
        now = time.monotonic()
        if self.spool.durable and now - self._checkpointed_at >= self.config.storage.checkpoint_interval:
            self._checkpointed_at = now
            task = asyncio.create_task(
                self.spool.checkpoint(self.replay_from(), self.config.storage.retention),
                name="skillgauge-checkpoint",
            )
            self._recording.add(task)
            task.add_done_callback(self._recording.discard)

    def replay_from(self) -> int:
        """The oldest spooled request a restart would still need."""
        waiting = self._pending[0][1] if self._pending else None
        needed = [r for r in (waiting, self.assembler.oldest_request(), *self._unfinished.values()) if r]
        return min(needed) if needed else self._last_request + 1

    def tick_gauges(self) -> None:
        self.metrics.sessions_open.set(self.assembler.open_count)
        reopened, self._reopened_seen = self.assembler.reopened - self._reopened_seen, self.assembler.reopened
        if reopened:
            self.metrics.sessions_reopened.inc(reopened)
        self._spool_bytes = self.spool.size_bytes()
        self.metrics.spool_bytes.set(self._spool_bytes)
        self.metrics.pending_requests.labels("assembler").set(len(self._pending))

    async def start(self) -> None:
        await self.recover()
        self._ticker = asyncio.create_task(self._tick_forever(), name="skillgauge-ticker")

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.sessions.check_interval)
            try:
                # Many sessions can fall due at once: close them a few at a time, so that
                # acknowledgements are not held up behind their evaluation.
                while self.assembler.close_due(limit=_CLOSE_BATCH) == _CLOSE_BATCH:
                    await asyncio.sleep(0)
                self.tick()
            except Exception:  # a bug here must not stop sessions from closing forever
                log.exception("session tick failed")

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Close every open session (reason ``shutdown``), evaluate it, flush, stop."""
        self.draining = True
        if self._ticker is not None:
            self._ticker.cancel()
        await self.settle()
        if self._worker is not None:
            self._worker.cancel()
        closed = self.assembler.close_all("shutdown")
        self.metrics.sessions_open.set(0)
        await self.drain(timeout)
        await self.runner.close()
        log.info("shutdown: closed and evaluated %d open sessions", closed)
        for sink in self.sinks:
            await sink.shutdown(timeout)
        if self.spool.durable:
            await self.spool.checkpoint(self.replay_from(), self.config.storage.retention)
        await self.spool.shutdown(timeout)
