"""The record stage: a session's finished account is handed to the exporters, then committed
as done, in that order.  The committed coverage line (with its close time, ``closed_at``)
is what the status API serves.

Once the exporters' outboxes hold a session's results durably, its coverage line (with
every result) is committed and the revision counts as evaluated: a crash before that
commit evaluates the revision again after the restart (reusing committed verdicts), a
crash after it never does.  Sessions that finish while a batch is being committed wait for
the next: one task and one transaction for all of them.

While storage fails (a full disk), both steps are tried again every second: a revision
left unrecorded would hold its requests in the spool until a restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from collector.component import Consumer
from collector.db.writer import is_storage_error
from collector.pausing import pause
from collector.state.metrics import CoverageMetrics
from collector.state.types import Recorded, Spool, encode_record
from evaluators.result import Coverage

log = logging.getLogger("skillgauge")
RECORD_BATCH = 64  # evaluated sessions per transaction
# How long a batch's sessions are prepared before the event loop gets a turn: what an
# acknowledgement may wait behind (as ``collector.sessions.items.SLICE_SECONDS``).
SLICE_SECONDS = 0.002
_clock = time.perf_counter  # what a slice is timed by (a seam for tests)
_STORAGE_RETRY = 1.0  # seconds between tries while storage fails


@dataclass(frozen=True, slots=True)
class Evaluated:
    """A session's finished account, and when (monotonic) the session closed."""

    coverage: Coverage
    closed_at: float


class Recorder:
    def __init__(self, store: Spool, metrics: CoverageMetrics, next: Consumer[Coverage]) -> None:
        self.store = store
        self.metrics = metrics
        self.next = next
        self.closed: list[Coverage] = []  # every account recorded, kept only when ``keep_closed``
        self.keep_closed = False
        self._waiting: deque[Evaluated] = deque()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def consume(self, item: Evaluated) -> None:
        self._waiting.append(item)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._record_waiting(), name="skillgauge-record")

    async def _record_waiting(self) -> None:
        waiting = self._waiting
        while waiting:  # a bounded batch at a time: the loop's other work waits for each
            await self._record([waiting.popleft() for _ in range(min(len(waiting), RECORD_BATCH))])

    async def _record(self, batch: list[Evaluated]) -> None:
        # Each revision as stored, and its coverage line with its results as dicts: what the
        # status queries' columns are made from, without parsing the text again.
        ready: list[tuple[Evaluated, Recorded, dict[str, Any]]] = []
        clock = _clock
        pause_at = clock() + SLICE_SECONDS
        for item in batch:
            if clock() >= pause_at:  # one transaction for the batch, the loop turning meanwhile
                await pause()
                pause_at = clock() + SLICE_SECONDS
            coverage = item.coverage
            session = coverage.session
            try:
                await self._while_storage_fails(functools.partial(self.next.consume, coverage))
                results = [r.to_dict() for r in coverage.results]
                records = [encode_record(r) for r in results]
                # When it closed, in unix seconds: what the status API lists sessions by.
                closed_at = round(time.time() - (time.monotonic() - item.closed_at), 3)
                line = coverage.to_dict()
                line["closed_at"] = closed_at
                summary = encode_record(line)
                line["results"] = results  # encoded without: the dicts the listing's columns read
                ready.append((item, (session.key, session.revision, records, summary), line))
            except Exception as err:  # the revision stays unfinished: a restart evaluates it again
                if not is_storage_error(err):
                    log.exception(
                        "recording session %r revision %d failed", session.session_id, session.revision
                    )
                    continue
                log.error(
                    "recording session %r revision %d failed: %s", session.session_id, session.revision, err
                )
        try:
            await self._while_storage_fails(
                lambda: self.store.save_coverage([r for _, r, _ in ready], [line for _, _, line in ready])
            )
        except Exception as err:  # as above, for every revision of the batch
            if not is_storage_error(err):
                log.exception("recording %d evaluated sessions failed", len(ready))
            else:  # a full disk: told once by the store, and again at exit
                log.error("recording %d evaluated sessions failed: %s", len(ready), err)
            return
        now = time.monotonic()
        if self.keep_closed:
            self.closed += [item.coverage for item, _, _ in ready]
        self.metrics.sessions_evaluated_together(
            (item.coverage.session, item.coverage.results, now - item.closed_at) for item, _, _ in ready
        )
        if log.isEnabledFor(logging.DEBUG):
            for item, (key, _, _, _), _ in ready:
                log.debug("session %r evaluated: %d results", key, len(item.coverage.results))

    async def _while_storage_fails(self, write: Callable[[], Awaitable[None]]) -> None:
        """Run ``write``; while it fails for want of storage, wait and run it again (until
        shutdown, which leaves the revision to be evaluated again after the restart)."""
        waited = False
        while True:
            try:
                await write()
                return
            except Exception as err:
                if self._stopping or not is_storage_error(err):
                    raise
                if not waited:
                    log.warning("recording evaluated sessions waits for storage to work again: %s", err)
                    waited = True
                await asyncio.sleep(_STORAGE_RETRY)

    async def drain(self, timeout: float) -> None:
        """Wait until every account taken so far is recorded."""
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task}, timeout=timeout)

    async def shutdown(self, timeout: float) -> None:
        await self.drain(timeout)
        self._stopping = True
        await self.next.shutdown(timeout)
