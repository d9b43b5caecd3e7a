"""The record stage: a session's finished account is handed to the exporters, then committed
as done, in that order.  The committed coverage line (with its close time, ``closed_at``)
is what the status API serves.

Once the exporters' outboxes hold a session's results durably, its coverage line (with
every result) is committed and the revision counts as evaluated: a crash before that
commit evaluates the revision again after the restart (reusing committed verdicts), a
crash after it never does.  Accounts are taken a batch at a time (``RECORD_BATCH``), and a
batch's records are queued for the store without waiting for the commit of the batches
before it (up to ``SAVES_IN_FLIGHT`` of them): a wave of sessions closed together shares
the store's next transaction, and each account is let go once its own batch is committed,
not after every batch before it.  Each batch's revisions are counted in the metrics (and,
with ``keep_closed``, kept) once committed, in the order taken.

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
from collector.state.metrics import CoverageMetrics
from collector.state.types import Recorded, Spool, encode_record
from evaluators.result import Coverage

log = logging.getLogger("skillgauge")
RECORD_BATCH = 64  # evaluated sessions taken at a time (~2 ms of the loop)
# Batches whose records wait for their commit while the next is taken.  The store's writer
# gathers what is queued within ~50 ms into one transaction; taking one batch only once the
# last was committed held a wave of 550 closed sessions (one second's at saturation) for
# nine of those waits, and every account alive meanwhile is what young collections visit.
SAVES_IN_FLIGHT = 16
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
        saving: set[asyncio.Task[None]] = set()
        last: asyncio.Task[None] | None = None  # the batch taken before, counted before this one
        while waiting or saving:
            if not waiting or len(saving) >= SAVES_IN_FLIGHT:
                await asyncio.wait(saving, return_when=asyncio.FIRST_COMPLETED)
                saving = {task for task in saving if not task.done()}
                continue
            # A bounded batch at a time: the loop's other work waits for each.
            ready = await self._ready([waiting.popleft() for _ in range(min(len(waiting), RECORD_BATCH))])
            last = asyncio.create_task(self._save(ready, last), name="skillgauge-record-save")
            saving.add(last)
            await asyncio.sleep(0)  # what else the loop has waits for one batch, not a wave

    async def _ready(self, batch: list[Evaluated]) -> list[tuple[Evaluated, Recorded, dict[str, Any]]]:
        """Each account of ``batch`` handed to the exporters, then as the store records it."""
        # Each revision as stored, and its coverage line with its results as dicts: what the
        # status queries' columns are made from, without parsing the text again.
        ready: list[tuple[Evaluated, Recorded, dict[str, Any]]] = []
        for item in batch:
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
        return ready

    async def _save(
        self, ready: list[tuple[Evaluated, Recorded, dict[str, Any]]], before: asyncio.Task[None] | None
    ) -> None:
        """Commit ``ready``'s revisions; once committed, and once ``before`` (the batch taken
        before it) is done, count them (and keep them, with ``keep_closed``)."""
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
        finally:
            if before is not None:  # counted in the order taken
                await asyncio.wait({before})
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
