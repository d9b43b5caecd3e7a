"""The spool stage: a request is in the store before it is acknowledged.

``consume`` appends the request's bytes to the store's request log (a segment file, written
on the event loop: no other thread is waited for), and only then hands it on (``Spooled``,
with its request id) and returns, so that an acknowledged request survives ``kill -9``.  Which spans of a trace request are usable
is known before the commit (``check_spans``), so the answer does not wait for detection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.component import Consumer, Retryable
from collector.db.writer import Faults
from collector.otlp import classes
from collector.otlp.received import Accepted, Received, Spooled
from collector.sessions.items import checking_spans
from collector.sessions.stage import stepped
from collector.spool.metrics import SpoolMetrics
from collector.state.types import Spool
from collector.telemetry import RateLimitedLog

log = logging.getLogger("skillgauge")
# How old the spool's size may be when a request is admitted (also read at every scrape).
_REFRESH_EVERY = 0.5


class SpoolStage:
    def __init__(
        self,
        store: Spool,
        next: Consumer[Spooled],
        max_bytes: int,
        admit_next: Callable[[], None],
        metrics: SpoolMetrics,
        check: Callable[[ExportTraceServiceRequest, str], Awaitable[Accepted]] | None = None,
        release: Callable[[Accepted], None] = lambda outcome: None,
        room: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.next = next
        self._max_bytes = max_bytes
        self._admit_next = admit_next
        self._check = check or _checked  # may remove spans from a trace request (sessions.max_open)
        self._release = release  # what ``check`` promised, for a request never handed on
        # Waits (bounded) while a bound downstream that lifts by itself is reached: a request
        # admitted before its body was read may find the queue full again.
        self._room = room
        self.size_bytes = 0  # as last read (``refresh``)
        self._refreshed_at = -_REFRESH_EVERY
        self._faults_seen = Faults()  # the store's fault counts as last copied to the metrics
        self._warn_refused = RateLimitedLog(log, logging.WARNING, 30.0)

    def admit(self) -> None:
        """Raise ``Retryable`` when a bound is reached (this one or one downstream), logged
        at WARN once per 30 s with the bound's message; nothing has been taken yet."""
        try:
            self._admit_next()
            now = time.monotonic()
            if now - self._refreshed_at >= _REFRESH_EVERY:  # a few stat calls: not per request
                self.refresh(now)
            if self.size_bytes > self._max_bytes:
                raise Retryable(
                    f"the spool holds {self.size_bytes} bytes (storage.max_bytes); retry later",
                    retry_after=10.0,
                )
        except Retryable as refusal:
            self._warn_refused("requests refused with backpressure: %s", refusal)
            raise

    def refresh(self, now: float | None = None) -> None:
        self.size_bytes = self.store.size_bytes()
        self.metrics.spool_bytes.set(self.size_bytes)
        self._refreshed_at = time.monotonic() if now is None else now
        faults, seen = self.store.faults, self._faults_seen
        for counts, last, metric in (
            (faults.write_failures, seen.write_failures, self.metrics.storage_write_failures),
            (faults.quarantined, seen.quarantined, self.metrics.spool_quarantined),
        ):
            for label, count in list(counts.items()):
                if count > last.get(label, 0):
                    metric.labels(label).inc(count - last.get(label, 0))
                    last[label] = count

    async def consume(self, item: Received) -> None:
        if self._room is not None:
            await self._room()
        self.admit()
        if item.signal == "traces":
            checked = await self._check(classes.as_traces(item.request), item.tenant)
            item.outcome.take(checked)
            if checked.over_max_open:  # spans were removed: spool what is left
                item = replace(item, raw=None)
        raw = item.raw if item.raw is not None else item.request.SerializeToString()
        try:
            request_id = await self.store.append(item.signal, raw, item.tenant)
        except BaseException:
            self._release(item.outcome)
            raise
        await self.next.consume(Spooled(item, request_id))

    async def shutdown(self, timeout: float) -> None:
        await self.next.shutdown(timeout)


async def _checked(request: ExportTraceServiceRequest, _tenant: str) -> Accepted:
    """What of ``request`` will be taken (``checking_spans``), the event loop running in between."""
    return await stepped(checking_spans(request))
