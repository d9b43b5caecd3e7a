"""Evaluation spans (and optional ``gen_ai.evaluation.result`` log records) to a downstream
OTLP endpoint, through an outbox, with retries and exponential backoff.

``OtlpExporter`` is a ``ResultSink``: ``consume`` encodes a finished session's results and
hands them to one ``Channel`` per signal (traces; logs when enabled).  Each channel owns an
outbox and one sender task: it reads the oldest entries, sends them as one request,
acknowledges them on success, and on a retryable failure waits (exponential backoff with
jitter, or the server's RetryInfo / Retry-After when longer) and tries again, forever.  A
downstream outage therefore delays results and never drops them, short of the outbox's
bound; both show on ``/metrics`` (``skillgauge_export_backlog``,
``skillgauge_export_failures_total``, ``skillgauge_export_dropped_total``).

What is retryable follows OTLP (REFERENCE.md section 6): gRPC CANCELLED, DEADLINE_EXCEEDED,
ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS, and RESOURCE_EXHAUSTED only with RetryInfo;
HTTP 429, 502, 503, 504; connection errors and timeouts.  Anything else is a permanent
refusal: the batch is dropped, counted and logged, since sending it again cannot succeed.
A partial success is a success (OTLP forbids retrying it); its rejected count is logged.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import aiohttp
import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.export import encode
from collector.export.config import OtlpExport, Retry
from collector.export.metrics import ExportMetrics
from collector.export.outbox import Entry, MemoryOutbox, Outbox
from evaluators.result import Coverage

log = logging.getLogger("skillgauge.export")
_LEASED_ELSEWHERE = 1.0  # seconds before a sender looks again for entries it may send

Signal = Literal["traces", "logs"]

_GRPC_METHOD = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
_HTTP_PATH = {"traces": "/v1/traces", "logs": "/v1/logs"}
_RETRYABLE_GRPC = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_RETRYABLE_HTTP = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one send attempt came to."""

    ok: bool
    retryable: bool = False
    reason: str = ""  # low-cardinality, for the failures counter
    retry_after: float | None = None  # seconds the server asked us to wait
    rejected: int = 0  # partial success: items the server refused
    message: str = ""


OK = Outcome(ok=True)


class Transport(Protocol):
    async def send(self, signal: Signal, body: bytes) -> Outcome: ...

    async def close(self) -> None: ...


# -- classification (pure) ---------------------------------------------------------------


def _partial(signal: Signal, body: bytes) -> Outcome:
    if not body:
        return OK
    try:
        if signal == "traces":
            t = ExportTraceServiceResponse.FromString(body)
            rejected, message = t.partial_success.rejected_spans, t.partial_success.error_message
        else:
            lg = ExportLogsServiceResponse.FromString(body)
            rejected, message = lg.partial_success.rejected_log_records, lg.partial_success.error_message
    except DecodeError:
        return OK  # a 200 we cannot read is still an acknowledgement
    return Outcome(ok=True, rejected=int(rejected), message=message)


def retry_info_delay(status_details: bytes | None) -> float | None:
    """The RetryInfo delay inside a ``grpc-status-details-bin`` google.rpc.Status, if any."""
    if not status_details:
        return None
    try:
        status = status_pb2.Status.FromString(status_details)
    except DecodeError:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


def classify_grpc(code: grpc.StatusCode, details: str, status_details: bytes | None) -> Outcome:
    delay = retry_info_delay(status_details)
    retryable = code in _RETRYABLE_GRPC or (code == grpc.StatusCode.RESOURCE_EXHAUSTED and delay is not None)
    return Outcome(
        ok=False, retryable=retryable, reason=code.name.lower(), retry_after=delay, message=details or ""
    )


def classify_http(status: int, retry_after: str | None, body: bytes) -> Outcome:
    delay: float | None = None
    if retry_after and retry_after.strip().isdigit():
        delay = float(retry_after.strip())
    message = ""
    try:
        message = status_pb2.Status.FromString(body).message
    except DecodeError:
        message = body[:200].decode("utf-8", "replace")
    return Outcome(
        ok=False,
        retryable=status in _RETRYABLE_HTTP,
        reason=f"http_{status}",
        retry_after=delay,
        message=message,
    )


def backoff(
    attempt: int, retry: Retry, jitter: float = 0.2, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (attempt counts failures, from 1)."""
    base = min(retry.max_interval, retry.initial_interval * retry.multiplier ** max(attempt - 1, 0))
    return max(0.0, base * (1 - jitter + 2 * jitter * rand()))


# -- transports (I/O only) ---------------------------------------------------------------


class GrpcTransport:
    def __init__(self, config: OtlpExport) -> None:
        self._config = config
        target = config.authority
        options = [("grpc.max_send_message_length", 64 * 1024**2)]
        compression = (
            grpc.Compression.Gzip if config.compression == "gzip" else grpc.Compression.NoCompression
        )
        if config.tls:
            self._channel = grpc.aio.secure_channel(
                target, grpc.ssl_channel_credentials(), options=options, compression=compression
            )
        else:
            self._channel = grpc.aio.insecure_channel(target, options=options, compression=compression)
        self._metadata = tuple((k.lower(), v) for k, v in config.headers.items())
        self._calls = {
            signal: self._channel.unary_unary(method, request_serializer=None, response_deserializer=None)
            for signal, method in _GRPC_METHOD.items()
        }

    async def send(self, signal: Signal, body: bytes) -> Outcome:
        try:
            response = await self._calls[signal](body, timeout=self._config.timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as err:
            details = None
            for key, value in err.trailing_metadata() or ():
                if key == "grpc-status-details-bin" and isinstance(value, bytes):
                    details = value
            return classify_grpc(err.code(), err.details() or "", details)
        return _partial(signal, bytes(response))

    async def close(self) -> None:
        await self._channel.close()


class HttpTransport:
    def __init__(self, config: OtlpExport) -> None:
        self._config = config
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._config.timeout), auto_decompress=True
            )
        return self._session

    async def send(self, signal: Signal, body: bytes) -> Outcome:
        headers = {**self._config.headers, "Content-Type": "application/x-protobuf"}
        if self._config.compression == "gzip":
            body = gzip.compress(body, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        url = self._config.endpoint + _HTTP_PATH[signal]
        try:
            async with self._client().post(url, data=body, headers=headers) as resp:
                payload = await resp.read()
                if 200 <= resp.status < 300:
                    return _partial(signal, payload)
                return classify_http(resp.status, resp.headers.get("Retry-After"), payload)
        except TimeoutError:
            return Outcome(ok=False, retryable=True, reason="timeout", message="request timed out")
        except aiohttp.ClientError as err:
            return Outcome(ok=False, retryable=True, reason="connection", message=str(err))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def transport_for(config: OtlpExport) -> Transport:
    return GrpcTransport(config) if config.protocol == "grpc" else HttpTransport(config)


# -- the sender --------------------------------------------------------------------------


class Channel:
    """One signal's outbox and the one task that drains it."""

    def __init__(
        self,
        signal: Signal,
        config: OtlpExport,
        transport: Transport,
        metrics: ExportMetrics,
        outbox: Outbox,
        build: Callable[[list[bytes]], bytes],
    ) -> None:
        self.signal = signal
        self.name = f"otlp_{signal}"
        self._config = config
        self._transport = transport
        self._metrics = metrics
        self.outbox = outbox
        self._build = build
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._shutdown_deadline = float("inf")
        self.attempts = 0  # consecutive failures
        self._update_backlog()

    @property
    def backlog(self) -> int:
        return len(self.outbox)

    async def enqueue(self, entries: list[Entry]) -> None:
        """Put entries in the outbox (durably, with a durable outbox) and wake the sender."""
        dropped = await self.outbox.put(entries)
        if dropped:
            self._metrics.export_dropped.labels(self.name, "queue_full").inc(dropped)
            log.error(
                "%s: outbox full (%d results): dropped the %d oldest; raise export.otlp.queue_size "
                "or fix the downstream",
                self.name,
                len(self.outbox),
                dropped,
            )
        self._update_backlog()
        self._wake.set()
        self.start()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"skillgauge-export-{self.signal}")

    def _update_backlog(self) -> None:
        self._metrics.export_backlog.labels(self.name).set(self.backlog)

    async def _run(self) -> None:
        while True:
            try:
                if not len(self.outbox):
                    if self._stopping:
                        return
                    self._wake.clear()
                    # Shared with other replicas: look now and then for what a dead one left.
                    poll = getattr(self.outbox, "poll_every", None)
                    try:
                        await asyncio.wait_for(self._wake.wait(), poll)
                    except TimeoutError:
                        await self.outbox.refresh()  # type: ignore[attr-defined]
                    continue
                delay = await self.send_once()
                if delay:
                    if self._stopping and self._shutdown_deadline <= time.monotonic() + delay:
                        return  # the next attempt would come after the shutdown deadline
                    await asyncio.sleep(delay)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not stop exports for good
                log.exception("%s: sender failed; retrying", self.name)
                await asyncio.sleep(1.0)

    async def send_once(self) -> float:
        """Send the oldest batch once; return seconds to wait before the next attempt."""
        entries = await self.outbox.peek(self._config.batch_size)
        if not entries:  # what waits is leased to other replicas (a shared store): look again later
            return _LEASED_ELSEWHERE if len(self.outbox) else 0.0
        outcome = await self._transport.send(self.signal, self._build([e.payload for e in entries]))
        if outcome.ok:
            await self.outbox.ack(e.key for e in entries)
            now = time.time()
            self._metrics.exported.labels(self.name).inc(len(entries) - outcome.rejected)
            for entry in entries:
                self._metrics.export_lag.labels(self.name).observe(max(0.0, now - entry.enqueued_at))
            if outcome.rejected:
                self._metrics.export_dropped.labels(self.name, "partially_rejected").inc(outcome.rejected)
                log.warning(
                    "%s: downstream accepted the batch but rejected %d items: %s",
                    self.name,
                    outcome.rejected,
                    outcome.message,
                )
            if self.attempts:
                log.info("%s: export recovered after %d failed attempts", self.name, self.attempts)
            self.attempts = 0
            self._update_backlog()
            return 0.0
        self._metrics.export_failures.labels(self.name, outcome.reason).inc()
        if not outcome.retryable:
            await self.outbox.ack(e.key for e in entries)
            self._metrics.export_dropped.labels(self.name, "rejected").inc(len(entries))
            log.error(
                "%s: downstream refused %d results for good (%s: %s); dropped them",
                self.name,
                len(entries),
                outcome.reason,
                outcome.message,
            )
            self._update_backlog()
            return 0.0
        self.attempts += 1
        delay = max(backoff(self.attempts, self._config.retry), outcome.retry_after or 0.0)
        log.log(
            logging.WARNING if self.attempts in (1, 5) or self.attempts % 50 == 0 else logging.DEBUG,
            "%s: export failed (%s: %s), attempt %d; %d results waiting; retrying in %.1fs",
            self.name,
            outcome.reason,
            outcome.message[:200],
            self.attempts,
            self.backlog,
            delay,
        )
        return delay

    async def shutdown(self, timeout: float) -> None:
        """Try to deliver what is waiting until ``timeout``; then report what is left."""
        self._stopping = True
        self._shutdown_deadline = time.monotonic() + timeout
        self._wake.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=timeout)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        left = len(self.outbox)
        if left:
            durable = getattr(self.outbox, "durable", False)
            log.error(
                "%s: %d results not exported at shutdown (%s)",
                self.name,
                left,
                "kept in the outbox for the next start" if durable else "in-memory outbox: they are lost",
            )
        await self.outbox.close()


class OtlpExporter:
    """A ``ResultSink`` that sends every result downstream as an evaluation span."""

    def __init__(
        self,
        config: OtlpExport,
        metrics: ExportMetrics,
        *,
        transport: Transport | None = None,
        outbox: Callable[[Signal], Outbox] | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self._transport = transport or transport_for(config)
        self._clock = clock
        res = encode.resource()
        make_outbox = outbox or (lambda _signal: MemoryOutbox(config.queue_size))
        self.channels: dict[Signal, Channel] = {
            "traces": Channel(
                "traces",
                config,
                self._transport,
                metrics,
                make_outbox("traces"),
                lambda payloads: encode.trace_request(payloads, res),
            )
        }
        if config.logs:
            self.channels["logs"] = Channel(
                "logs",
                config,
                self._transport,
                metrics,
                make_outbox("logs"),
                lambda payloads: encode.logs_request(payloads, res),
            )

    async def start(self) -> None:
        for channel in self.channels.values():
            channel.start()

    async def consume(self, coverage: Coverage) -> None:
        now_ns = self._clock()
        now = now_ns / 1e9
        spans = encode.encode_spans(coverage, now_ns)
        await self.channels["traces"].enqueue([Entry(e.key, e.payload, now) for e in spans])
        if "logs" in self.channels:
            records = encode.encode_logs(coverage, now_ns)
            await self.channels["logs"].enqueue([Entry(e.key, e.payload, now) for e in records])

    async def shutdown(self, timeout: float = 10.0) -> None:
        await asyncio.gather(*(c.shutdown(timeout) for c in self.channels.values()))
        await self._transport.close()
