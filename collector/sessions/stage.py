"""The sessions stage: spooled requests in arrival order, through the assembler (which groups
items into sessions and feeds each session's evidence), closed sessions on to ``next``.

A trace request is queued and assembled by one task, so its Export answer is the spool's
commit, not detection (the queue is bounded: ``sessions.max_pending_requests``; a request
that finds it full waits up to ``sessions.pending_wait`` for room, ``room``).  A log
request is assembled before its answer, because whether a record can be used depends on its
session key.  A ticker closes idle and expired sessions and checkpoints the store.

Restart (``recover``): the store's requests are replayed from the oldest one an unfinished
session needs; spans of revisions already evaluated are skipped; revisions that closed but
were not evaluated are closed again at the same point of the replay.  A spooled request
that cannot be parsed or assembled is quarantined by the store and the replay goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.component import Consumer, Retryable
from collector.detect.expectations import Rules
from collector.otlp import classes, wire
from collector.otlp.received import Accepted, Received, Signal, Spooled
from collector.pausing import pause
from collector.sessions.assembler import Assembler
from collector.sessions.config import Sessions
from collector.sessions.items import SLICE_SECONDS, Steps, checking_spans
from collector.sessions.metrics import SessionsMetrics
from collector.state.config import Storage
from collector.state.revisions import unwritten_kept
from collector.state.types import Closed, Recovery, Reopenable, Spool
from collector.switching import SWITCHING
from evaluators.evidence import Session, split_session_key

log = logging.getLogger("skillgauge")
# Requests waiting to be assembled beyond which the loop has a backlog: flat out the queue
# fills (``max_pending_requests``); at half load a few wait at times, and a long switch
# interval then showed in the acknowledgements' p50 (6 -> 15 ms with any one waiting).
_BACKLOG = 8


async def stepped(steps: Steps) -> Accepted:
    """What ``steps`` return, the event loop running at each of their pauses."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await pause()


# Sessions closed (and planned for evaluation) per event-loop turn while the loop has a
# backlog (throughput is then the bound, and a request waits behind the queue anyway): 64 in a
# row, their closing and evaluating code stays hot, and a served span costs less CPU
# (tests/perf/README.md, "The loop's own serving overhead").  Without a backlog, due sessions
# close for ``SLICE_SECONDS`` at a time, as requests are assembled, so that acknowledgements
# are not held up behind their evaluation (a session's close costs ~0.1 to a few ms).
_CLOSE_BATCH_BACKLOG = 64
_clock = time.perf_counter  # what a slice of closes is timed by (a seam for tests)
RECOVERY_LINE_EVERY = 10.0  # seconds between the lines a long replay of the spool logs


def close_batch(waiting: int) -> int | None:
    """How many due sessions to close in one event-loop turn while ``waiting`` requests wait
    to be assembled; None: as many as close within ``SLICE_SECONDS``."""
    return _CLOSE_BATCH_BACKLOG if waiting > _BACKLOG else None


class SessionsStage:
    def __init__(
        self,
        config: Sessions,
        storage: Storage,
        rules: Rules,
        store: Spool,
        metrics: SessionsMetrics,
        next: Consumer[Session],
        tenant_max_open: dict[str, int] | None = None,
    ) -> None:
        """``tenant_max_open``: tenants' own ``max_open_sessions``."""
        self.config = config
        self.storage = storage
        self.store = store
        self.metrics = metrics
        self.next = next
        self.assembler = Assembler(
            config,
            self._on_close,
            rules=rules,
            on_record=store.record_closed,
            on_unreadable=lambda signal, reason: metrics.unreadable.labels(signal, reason).inc(),
            on_duplicate=lambda signal: metrics.duplicates.labels(signal).inc(),
            on_keep=store.keep_reopenable,
            on_forget=store.forget_reopenable,
            tenant_max_open=tenant_max_open,
            rebuild_kept=store.durable,
        )
        self._closed: deque[Session] = deque()  # closed by the assembler, not yet handed on
        self._closed_count: dict[str, Any] = {}  # reason -> its ``sessions_closed`` series
        self._pending: deque[Spooled] = deque()  # spooled, acknowledged, not assembled
        self._waiting: deque[asyncio.Future[None]] = deque()  # callers of ``room``, oldest first
        self._promised = 0  # sessions that admitted, not yet assembled requests may open
        self._checking = asyncio.Lock()  # one ``check`` at a time
        self._assembling = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._checkpoints: set[asyncio.Task[None]] = set()
        self._last_request = 0
        self._checkpointed_at = 0.0
        self._reopened_seen = 0
        self._discarded_seen = 0
        self._unkeyed_seen = 0
        self._bodies_cut_seen = 0
        # Replay's: trace requests wait to be assembled until ``settle``, so that none is
        # assembled while more are taken, and a logs request (assembled as it is taken) is
        # never placed between the spans of a trace request half assembled: what is assembled
        # in what order then depends on the input alone, not on the machine's speed.
        self.assemble_on_settle = False

    # -- intake ---------------------------------------------------------------------------

    def admit(self) -> None:
        """Raise ``Retryable`` when a bound is reached; nothing has been taken yet."""
        self.assembler.admit()
        if len(self._pending) >= self.config.max_pending_requests:
            raise Retryable(
                f"{len(self._pending)} requests wait to be assembled (sessions.max_pending_requests); "
                "retry later",
                retry_after=1.0,
            )

    async def room(self) -> None:
        """Return once fewer than ``sessions.max_pending_requests`` requests wait to be
        assembled, or after ``sessions.pending_wait``, whichever is first (``admit`` then
        refuses what is still over the bound).  A sender at a full queue waits for it to move,
        as behind a Collector queue that blocks on overflow, instead of being refused and
        backing off while the queue drains (a gRPC request is refused after it was received
        whole).  At most ``max_pending_requests`` callers wait; any more return at once."""
        limit = self.config.max_pending_requests
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.pending_wait
        behind = bool(self._waiting)  # first come, first served: a newcomer waits behind them
        woken = False
        while (behind or len(self._pending) >= limit) and len(self._waiting) < limit:
            left = deadline - loop.time()
            if left <= 0:
                return
            waiter = loop.create_future()
            if woken:  # the room it was woken for was taken meanwhile: it is still first
                self._waiting.appendleft(waiter)
            else:
                self._waiting.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                return
            finally:
                with contextlib.suppress(ValueError):  # woken: taken off already
                    self._waiting.remove(waiter)
            behind, woken = False, True

    def _wake_waiting(self) -> None:
        """When there is room for one more request, wake the oldest caller of ``room`` still
        waiting; when the queue is empty, every caller (a newcomer waiting behind a caller the
        last request woke would otherwise wait for a request that never comes)."""
        if len(self._pending) >= self.config.max_pending_requests:
            return
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if self._pending:
                    return

    async def check(self, request: ExportTraceServiceRequest, tenant: str = "") -> Accepted:
        """What of a trace request is taken, before it is spooled: the spans that would open
        a session past ``sessions.max_open`` are removed from it and rejected (partial
        success), so one request cannot open sessions without bound.  Until the request is
        assembled, the sessions it may open are promised (``release`` gives them back).
        A large request is checked in slices, the event loop (other requests, health checks)
        running in between.  The sessions a request may open are counted one request at a
        time, so each sees what was promised before it: at once, unless it may open more
        sessions than there is room for (then in slices too, while later requests wait)."""
        checked = await stepped(checking_spans(request))
        async with self._checking:
            steps = self.assembler.capping_new_sessions(request, self._promised, tenant, checked)
            result = await stepped(steps)
            self._promised += result.opens
        if result.over_max_open:
            self.metrics.rejected.labels("traces", "max_open").inc(result.over_max_open)
        return result

    def release(self, outcome: Accepted) -> None:
        self._promised = max(0, self._promised - outcome.opens)
        outcome.opens = 0

    async def consume(self, item: Spooled) -> None:
        received = item.received
        self._last_request = max(self._last_request, item.request_id)
        if received.signal == "logs":
            await self.assemble(received, item.request_id)
            return
        self._pending.append(item)
        if not self.assemble_on_settle:
            self._wake.set()
            self._start()
        self._count(received, received.outcome)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._assemble_forever(), name="skillgauge-assembler")

    async def _assemble_forever(self) -> None:
        while True:
            # A backlog makes the GIL's hand-offs rarer (``collector.switching``).
            SWITCHING.backlog(len(self._pending) > _BACKLOG)
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            item = self._pending[0]
            self._assembling = True
            try:
                request = classes.as_traces(item.received.request)
                received = item.received
                for entry in self.assembler.feed(
                    request,
                    item.request_id,
                    Accepted(),
                    raw=received.raw,
                    tenant=received.tenant,
                    rebuilds=True,
                ):
                    if entry is not None:  # a span reopens a kept session: rebuilt first
                        await self._rebuild(entry)
                        continue
                    await self._forward()
                    await pause()  # acknowledgements need not wait for a whole request
                await self._forward()
            except Exception:  # one bad request must not stop assembly for everyone
                log.exception("assembling spooled request %d failed", item.request_id)
            finally:
                self.release(self._pending.popleft().received.outcome)
                self._assembling = False
                self._wake_waiting()
            self.metrics.sessions_open.set(self.assembler.open_count)

    async def settle(self) -> None:
        """Wait until every acknowledged request has been assembled (read-your-writes)."""
        while self._pending or self._assembling:
            self._wake.set()
            self._start()
            await asyncio.sleep(0.001)

    async def assemble(self, item: Received, request_id: int = 0, *, admit: bool = True) -> Accepted:
        """Assemble one request now; its outcome is also ``item.outcome``."""
        request = item.request
        await self._reopen_dormant(request, request_id, item.tenant)
        if item.signal == "traces":
            result = self.assembler.add_spans(
                classes.as_traces(request), request_id, admit=admit, raw=item.raw, tenant=item.tenant
            )
        else:
            result = self.assembler.add_logs(
                classes.as_logs(request), request_id, admit=admit, raw=item.raw, tenant=item.tenant
            )
        item.outcome.take(result)
        self._count(item, result)
        self.metrics.sessions_open.set(self.assembler.open_count)
        await self._forward()
        return result

    def _count(self, item: Received, result: Accepted) -> None:
        self.metrics.received.labels(item.signal, item.protocol).inc(result.accepted)
        if result.uncorrelated:
            self.metrics.rejected.labels(item.signal, "uncorrelated").inc(result.uncorrelated)
        invalid = result.rejected - result.over_max_open - result.uncorrelated
        if invalid > 0:
            self.metrics.rejected.labels(item.signal, "invalid_item").inc(invalid)

    async def _reopen_dormant(
        self, request: ExportTraceServiceRequest | ExportLogsServiceRequest, request_id: int, tenant: str
    ) -> None:
        """Before ``request`` is assembled: rebuild each revision from before a restart that
        its items reopen, from that session's spooled requests only (read off the loop), so
        that it reopens whole."""
        if not self.assembler.has_dormant:
            return
        for entry in self.assembler.dormant_in(request, request_id, tenant):
            await self._rebuild(entry)

    async def _rebuild(self, entry: Reopenable) -> None:
        """Rebuild a kept revision from its spooled requests (read off the loop), so that the
        item that reopens it finds it whole."""
        parsed: list[ExportTraceServiceRequest | ExportLogsServiceRequest] = []
        for kept_id, signal, payload in await self.store.read_requests(entry.requests):
            kept = classes.TraceRequest() if signal == "traces" else classes.LogsRequest()
            try:
                wire.parse(kept, payload)
            except DecodeError:
                log.warning(
                    "request %d kept for session %r cannot be parsed: left out", kept_id, entry.session
                )
                continue
            parsed.append(kept)
        self.assembler.restore(entry, parsed)
        log.debug(
            "session %r revision %d rebuilt from %d spooled requests to reopen",
            entry.session,
            entry.revision,
            len(parsed),
        )

    # -- closing --------------------------------------------------------------------------

    def _on_close(self, session: Session, reason: str) -> None:
        counted = self._closed_count.get(reason)
        if counted is None:
            counted = self._closed_count[reason] = self.metrics.sessions_closed.labels(reason)
        counted.inc()
        self._closed.append(session)

    async def _forward(self) -> None:
        while self._closed:
            await self.next.consume(self._closed.popleft())

    async def close(self, key: str, reason: str) -> None:
        """Close one open session now."""
        self.assembler.close(key, reason)
        await self._forward()

    async def close_all(self, reason: str) -> int:
        closed = self.assembler.close_all(reason)
        self.metrics.sessions_open.set(0)
        await self._forward()
        return closed

    # -- restart ---------------------------------------------------------------------------

    async def recover(self, recovery: Recovery) -> None:
        """Rebuild what a previous process left: open sessions, unfinished revisions."""
        started = time.monotonic()
        next_line = started + RECOVERY_LINE_EVERY
        unfinished = self._prepare(recovery)
        requests = spans = 0
        for request_id, signal, payload, tenant in self.store.requests(recovery.replay_from):
            while unfinished and unfinished[0].last_request < request_id:
                done = unfinished.pop(0)
                await self.close(done.session, done.reason)
            self._last_request = request_id
            kind: Signal = "traces" if signal == "traces" else "logs"
            request = classes.TraceRequest() if kind == "traces" else classes.LogsRequest()
            try:
                wire.parse(request, payload)  # as the receivers parsed it
            except DecodeError as err:
                self.store.quarantine(
                    request_id, signal, payload, "undecodable", f"not an OTLP request: {err}"
                )
                continue
            try:
                spans += (
                    await self.assemble(
                        Received(kind, request, "spool", tenant=tenant), request_id, admit=False
                    )
                ).accepted
            except Exception as err:  # one bad request must not keep the service from starting
                log.exception("replaying spooled request %d failed", request_id)
                self.store.quarantine(
                    request_id, signal, payload, "undecodable", f"cannot be assembled: {err!r}"
                )
                continue
            requests += 1
            if requests % 200 == 0:
                await asyncio.sleep(0)  # let signals and timers run during a long replay
                if time.monotonic() >= next_line:  # a long replay says it is still going
                    next_line = time.monotonic() + RECOVERY_LINE_EVERY
                    log.info(
                        "recovering from the spool: %d requests (%d items) replayed in %.0fs, up to "
                        "request %d; %d sessions open so far",
                        requests,
                        spans,
                        time.monotonic() - started,
                        request_id,
                        self.assembler.open_count,
                    )
        for done in unfinished:
            await self.close(done.session, done.reason)
        self.assembler.skip = None
        log.log(
            logging.INFO if requests or recovery.closed else logging.DEBUG,
            "recovered from the spool in %.1fs: %d requests (%d items) replayed, %d sessions open, "
            "%d closed revisions re-evaluated, %d judge verdicts reusable",
            time.monotonic() - started,
            requests,
            spans,
            self.assembler.open_count,
            len(self.store.unfinished),
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
        for session, revision in recovery.latest.items():  # no stored revision is numbered again
            self.assembler.seed_revision(session, revision)
        # Evaluated revisions that later items may reopen whole.  One that closed but was not
        # evaluated is rebuilt by the replay itself (and kept again when it closes again).
        # Those whose reopenable rows a crash cut off come back from their closed rows.
        self.assembler.load_dormant(
            entry
            for entry in (*recovery.reopenable, *unwritten_kept(recovery))
            if (entry.session, entry.revision) in recovery.evaluated
            and recovery.latest.get(entry.session, 0) <= entry.revision
        )

        def skip(key: str | None, trace_id: bytes, request_id: int) -> bool:
            revisions = done.get(key, ()) if key is not None else by_trace.get(trace_id, ())
            return any(c.first_request <= request_id <= c.last_request for c in revisions)

        self.assembler.skip = skip
        return sorted(unfinished, key=lambda c: c.last_request)

    # -- housekeeping ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the ticker: idle and expired sessions close, the store is checkpointed."""
        self._ticker = asyncio.create_task(self._tick_forever(), name="skillgauge-ticker")

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.check_interval)
            try:
                await self._close_due()
                await self.tick()
            except Exception:  # a bug here must not stop sessions from closing forever
                log.exception("session tick failed")

    async def _close_due(self) -> None:
        """Close the sessions due, a batch or a slice at a time (``close_batch``), the event
        loop running in between: many can fall due at once."""
        clock = _clock
        while True:
            batch = close_batch(len(self._pending))
            if batch is not None:
                closed = self.assembler.close_due(limit=batch)
                await self._forward()
                if closed < batch:
                    return
            else:
                pause_at = clock() + SLICE_SECONDS
                while (closed := self.assembler.close_due(limit=1)) and clock() < pause_at:
                    await self._forward()
                await self._forward()
                if not closed:
                    return
            await pause()

    async def tick(self) -> None:
        self.assembler.close_due()
        await self._forward()
        self.refresh()
        now = time.monotonic()
        if self.store.durable and now - self._checkpointed_at >= self.storage.checkpoint_interval:
            self._checkpointed_at = now
            task = asyncio.create_task(self._checkpoint(), name="skillgauge-checkpoint")
            self._checkpoints.add(task)
            task.add_done_callback(self._checkpoints.discard)

    async def _checkpoint(self) -> None:
        try:
            await self.store.checkpoint(self.replay_from(), self.storage.retention)
        except Exception as err:  # the next tick tries again; a full disk is logged by the store
            level = logging.DEBUG if self.store.faults.unavailable is not None else logging.WARNING
            log.log(level, "spool checkpoint failed: %s", err)

    def replay_from(self) -> int:
        """The oldest spooled request a restart would still need."""
        waiting = self._pending[0].request_id if self._pending else None
        oldest = self.assembler.oldest_request()
        needed = [r for r in (waiting, oldest, *self.store.unfinished.values()) if r]
        return min(needed) if needed else self._last_request + 1

    def open_sessions(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """The open sessions of ``tenant`` (every tenant's with None), soonest to close
        first.  Each: ``session_id``, ``tenant``, ``revision``, ``spans``, ``skill_loads``
        (so far), ``idle_seconds``, ``closes_in_seconds`` and ``closes_by`` (``idle_timeout``
        or ``max_duration``: what closes it then unless a span comes first)."""
        rows = []
        for session in self.assembler.open_sessions():
            owner, session_id = split_session_key(session.key)
            if tenant is not None and owner != tenant:
                continue
            idle, closes_in, closes_by = self.assembler.due(session)
            rows.append(
                {
                    "session_id": session_id,
                    "tenant": owner,
                    "revision": session.revision,
                    "spans": session.spans,
                    "skill_loads": len(session.evidence.skill_loads),
                    "idle_seconds": round(idle, 1),
                    "closes_in_seconds": round(closes_in, 1),
                    "closes_by": closes_by,
                }
            )
        rows.sort(key=lambda row: (row["closes_in_seconds"], row["session_id"]))
        return rows

    def refresh(self) -> None:
        """Bring this stage's gauges up to date."""
        self.metrics.sessions_open.set(self.assembler.open_count)
        reopened, self._reopened_seen = self.assembler.reopened - self._reopened_seen, self.assembler.reopened
        if reopened:
            self.metrics.sessions_reopened.inc(reopened)
        discarded, self._discarded_seen = (
            self.assembler.discarded - self._discarded_seen,
            self.assembler.discarded,
        )
        if discarded:
            self.metrics.traces_discarded.inc(discarded)
        unkeyed, self._unkeyed_seen = self.assembler.unkeyed - self._unkeyed_seen, self.assembler.unkeyed
        if unkeyed:
            self.metrics.sessions_unkeyed.inc(unkeyed)
        cut, self._bodies_cut_seen = (
            self.assembler.bodies_cut - self._bodies_cut_seen,
            self.assembler.bodies_cut,
        )
        if cut:
            self.metrics.skill_bodies_cut.inc(cut)
        self.metrics.pending_requests.labels("assembler").set(len(self._pending))
        self.metrics.waiting_for_room.set(len(self._waiting))

    async def shutdown(self, timeout: float) -> None:
        """Assemble what was acknowledged, close every open session (``shutdown``), hand the
        sessions on, checkpoint, then shut ``next`` down."""
        if self._ticker is not None:
            self._ticker.cancel()
        await self.settle()
        if self._task is not None:
            self._task.cancel()
        discarded = self.assembler.discarded
        closed = await self.close_all("shutdown")
        discarded = self.assembler.discarded - discarded
        await self.next.shutdown(timeout)
        # A trace of a harness's own housekeeping (no session key, nothing to evaluate) closes
        # like a session and is dropped: say so apart, not as an evaluated session.
        dropped = f"; dropped {discarded} traces with nothing to evaluate" if discarded else ""
        log.info("shutdown: closed and evaluated %d open sessions%s", closed - discarded, dropped)
        if self._checkpoints:
            await asyncio.wait(set(self._checkpoints), timeout=timeout)
        if self.store.durable:
            await self.store.checkpoint(self.replay_from(), self.storage.retention)
