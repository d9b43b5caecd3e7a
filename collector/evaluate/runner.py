"""Evaluate closed sessions and hand each finished account (``Coverage``) onwards.

``submit`` is called from the assembler's close callback and must not block: the
evaluators plan the session at once (deterministic rows, not-applicable and skipped rows
are final), and its judge work joins one queue that at most ``judge.max_concurrency``
workers take from, their calls made on this event loop.  A session's ``Coverage`` is
delivered once, when all of its rows are in.  Nothing is dropped for want of room: work
queued always waits for its judge.  Each waiting evaluation keeps its closed session in
memory, so intake is bounded instead (``admit``): while ``judge.max_queue`` evaluations wait
or run, new requests are refused as retryable, and the sender's retries carry the traffic
until the judge catches up.

A judge that cannot be reached or has no capacity (``JudgeFailure.transient``: timeouts,
429, 529, 5xx, refused connections, after the client's own retries) delays a verdict; it
does not end it.  The work goes back to the head of the queue and no worker calls the judge
again before a backoff (``judge.requeue_backoff`` doubling up to ``judge.requeue_max_backoff``,
jittered) has passed; the first call that gets an answer ends the wait.  Work that has waited
``judge.max_wait`` (from when it was first queued, restarts included) while the judge fails
becomes ``error / judge_unreachable_timeout``.  Failures are counted
(``skillgauge_judge_failures_total{reason}``) and logged at WARN, one line per 30 s with the
number of lines suppressed.

Durable work: queued work is noted in the store (``pending_add``), and marked done once its
final row is committed (``pending_done``).  At shutdown with a durable store, ``drain``
waits for the work while the judge answers, then lets the calls in flight end and leaves the
rest in the store, its sessions unevaluated: the next start rebuilds those revisions from
the spool, reuses the verdicts committed (no second call) and finishes them.  Without a
durable store, what still waits at the deadline is recorded as ``skipped / shutdown``.
Queued work is leased to this replica with its session's evidence (``start``,
``collector.evaluate.takeover``): if the replica dies, another finishes it (``resume``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from collector.component import Consumer, Retryable
from collector.evaluate.config import Defaults, Evaluation
from collector.evaluate.execute import execute
from collector.evaluate.judge import judge_env
from collector.evaluate.metrics import EvaluateMetrics
from collector.evaluate.retry import requeue_delay
from collector.state.recorder import Evaluated
from collector.state.types import PendingJudge
from collector.telemetry import RateLimitedLog
from evaluators import suite
from evaluators.evidence import Session
from evaluators.judge.base import Judge, JudgeFailure, JudgeReply, JudgeRequest
from evaluators.judge.budget import Budget
from evaluators.judge.verdicts import Level, Scale
from evaluators.plan import CustomSpec, JudgeTask, Policy, Settings
from evaluators.registry import SkillRegistry, load_registry
from evaluators.result import Coverage, EvaluationResult, result_key, unjudged

log = logging.getLogger("skillgauge")
_MIN_RETRY_AFTER = 5.0  # seconds a refused sender waits while the judge queue is full

StoreResult = Callable[[EvaluationResult], Awaitable[None]]


def settings_from(config: Evaluation, registry: SkillRegistry, judge_available: bool) -> Settings:
    ev = config.evaluators
    policies = {
        name: Policy(e.enabled, e.sampling, e.model)
        for name, e in (
            ("skill_invoked", ev.skill_invoked),
            ("skill_selection_accuracy", ev.skill_selection_accuracy),
            ("skill_instruction_following", ev.skill_instruction_following),
            ("skill_omission", ev.skill_omission),
        )
    }
    custom = tuple(
        CustomSpec(
            c.name,
            c.level,
            c.instructions,
            Scale(
                tuple(Level(s.label, s.value, s.definition) for s in c.rating_scale),
                pass_threshold=c.pass_threshold
                if c.pass_threshold is not None
                else max(s.value for s in c.rating_scale),
                kind=c.scale_kind,
            ),
            Policy(c.enabled, c.sampling, c.model),
        )
        for c in ev.custom
    )
    return Settings(
        judge_configured=judge_available,
        model=config.judge.model,
        policies=policies,
        custom=custom,
        registry=registry,
        max_input_tokens=config.judge.max_input_tokens,
        max_tokens=config.judge.max_tokens,
    )


class PendingWork(Protocol):
    """Where queued judge work is noted (the store): see ``collector.evaluate.pending``."""

    durable: bool

    def pending_add(self, rows: list[PendingJudge], session: Session, closed_at: float) -> None: ...

    def pending_failed(self, key: str, attempts: int, error: str) -> None: ...

    def pending_done(self, keys: list[str]) -> None: ...

    def takeover(self, runner: Runner) -> Leases: ...


class Leases(Protocol):
    """The leases of a runner's queued work (``collector.evaluate.takeover``)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(eq=False)
class _Waiting:
    """A planned session whose judge rows are not all in."""

    session: Session
    slots: list[EvaluationResult | JudgeTask]
    remaining: int
    closed_at: float


@dataclass(eq=False)
class _Job:
    """One judge evaluation in the queue."""

    task: JudgeTask
    key: str
    owner: _Waiting
    index: int  # of its slot
    queued_at: float  # wall clock seconds, when first queued (before a restart too)
    attempts: int = 0  # calls that failed for want of a judge
    last_error: str = ""


class _Watch:
    """The judge, for one evaluation: remembers whether a call failed, and how."""

    def __init__(self, judge: Judge) -> None:
        self._judge = judge
        self.failure: JudgeFailure | None = None
        self.replies = 0

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        try:
            reply = await self._judge.complete(request)
        except JudgeFailure as failure:
            self.failure = failure
            raise
        self.replies += 1
        return reply

    async def close(self) -> None:
        return None  # the shared judge is closed by the runner


class Runner:
    """The evaluate stage: each closed ``Session`` in, its ``Evaluated`` account out."""

    def __init__(
        self,
        next: Consumer[Evaluated],
        config: Evaluation | None = None,
        metrics: EvaluateMetrics | None = None,
        judge: Judge | None = None,
        clock: Callable[[], float] = time.time,
        store: StoreResult | None = None,
        pending: PendingWork | None = None,
        tenant_budgets: dict[str, Budget] | None = None,
    ) -> None:
        """``tenant_budgets``: the judge budgets of tenants that have their own."""
        self.next = next
        # Exactly once: every judge verdict is committed (``store``) as soon as it arrives, and
        # verdicts committed before a restart (``recovered``, by idempotency key) are reused
        # instead of asking the judge again.
        self._store = store
        self.recovered: dict[str, dict[str, Any]] = {}
        # Judge work that waited before a restart: key -> (first queued at, failed calls).
        self.pending_since: dict[str, tuple[float, int]] = {}
        self._pending = pending
        self._durable = bool(pending is not None and pending.durable)
        self._clock = clock
        self.config = config or Defaults()
        self.metrics = metrics or EvaluateMetrics(CollectorRegistry())
        self.registry = load_registry(self.config.skills.paths)  # validated with the config
        self._env = judge_env(self.config, self.metrics, judge, clock, tenant_budgets)
        self.judge = self._env.judge if self._env is not None else None
        self.settings = settings_from(self.config, self.registry, self._env is not None)
        # The judge evaluations configured on, named in every coverage line.
        self.enabled = tuple(name for name in suite.JUDGE_EVALUATIONS if self.settings.policy(name).enabled)
        self.metrics.skill_labels.reserve([s.name for s in self.registry.skills.values()])
        self.metrics.judge_queue_capacity.set(self.config.judge.max_queue)
        self._jobs: deque[_Job] = deque()  # waiting for a worker, oldest first
        self._waiting: set[_Waiting] = set()
        self._workers: set[asyncio.Task[None]] = set()
        self._delivering: set[asyncio.Task[None]] = set()
        self._running = 0  # judge evaluations being executed
        self._queued = 0  # judge evaluations waiting or being executed
        self._room = asyncio.Event()  # set while fewer than judge.max_queue are (``admit`` takes)
        self._room.set()
        self._failures = 0  # rounds of calls in a row that failed for want of a judge
        self._failed_at = 0.0  # (monotonic) when the last such failure was counted
        self._hold_until = 0.0  # (monotonic) no call before this, after such failures
        self._stopping = False
        self._done: list[str] = []  # keys of work finished, to note in the store
        self._warn_failure = RateLimitedLog(log, logging.WARNING, 30.0)
        self._leases: Leases | None = None
        if len(self.registry):
            log.info(
                "skills registry: %d skills from %s (%s)",
                len(self.registry),
                ", ".join(self.config.skills.paths),
                ", ".join(sorted(s.name for s in self.registry.skills.values())),
            )

    def start(self) -> None:
        """Hold the leases of durable work (renewed while this replica lives) and take over
        other replicas' lapsed ones (after a restart's recovery: what it replays is its own)."""
        if self._durable and self._pending is not None and self._env is not None:
            self._leases = self._pending.takeover(self)
            self._leases.start()

    async def consume(self, item: Session) -> None:
        """Plan the session's evaluations; hand its account on at once when no judge call is
        needed, else when its last judge row is in."""
        finished = self.submit(item)
        if finished is not None:
            await self.next.consume(finished)

    def admit(self) -> None:
        """Raise ``Retryable`` while ``judge.max_queue`` judge evaluations wait or run: new
        requests would close into more waiting sessions, each held in memory until its judge
        answers.  Sessions already open still close and queue their work."""
        limit = self.config.judge.max_queue
        if self._queued < limit:
            return
        # A judge that fails is called again at the end of its backoff: retry no sooner.
        raise Retryable(
            f"{self._queued} judge evaluations wait (judge.max_queue {limit}): the judge is away "
            "or slower than sessions close; retry later",
            retry_after=max(_MIN_RETRY_AFTER, self._hold_until - time.monotonic()),
        )

    def spare(self) -> int:
        """How many more judge evaluations may be queued now (0 without a judge)."""
        return 0 if self._env is None else max(0, self.config.judge.max_queue - self._queued)

    async def room(self) -> None:
        """Return once ``admit`` takes requests again: fewer than ``judge.max_queue`` judge
        evaluations wait or run (for a sender in process, such as ``replay``, that waits
        where a network sender would retry)."""
        await self._room.wait()

    async def resume(self, session: Session, closed_at: float) -> None:
        """Evaluate a revision another replica queued and left (``collector.evaluate.takeover``):
        as ``consume``, for a session that closed at ``closed_at`` (unix seconds)."""
        finished = self.submit(session, closed_at)
        if finished is not None:
            await self.next.consume(finished)

    def submit(self, session: Session, closed_at_unix: float | None = None) -> Evaluated | None:
        """Plan a session (closed now, or at ``closed_at_unix``); its account if it is already
        complete, else None (its judge work is queued, and the worker that fills its last row
        hands the account on)."""
        closed_at = time.monotonic()
        if closed_at_unix is not None:
            closed_at -= max(0.0, time.time() - closed_at_unix)
        plan = suite.plan(session, self.settings)
        for skill in plan.body_mismatches:
            self.metrics.registry_body_mismatch.labels(self.metrics.skill_labels(skill)).inc()
        slots: list[EvaluationResult | JudgeTask] = list(plan.slots)
        pending: list[tuple[int, JudgeTask, str]] = []
        for i, slot in enumerate(slots):
            if not isinstance(slot, JudgeTask):
                continue
            key = _task_key(slot)
            earlier = self.recovered.pop(key, None)
            if earlier is not None:
                slots[i] = EvaluationResult.from_dict(earlier)
                self.metrics.judge_reused.inc()
            elif self._env is None:  # planned with a judge that is gone: cannot happen, but never drop
                slots[i] = _skipped(slot, "no_judge_configured", "no judge is configured")
            else:
                pending.append((i, slot, key))
        if not pending:
            return self._finished(session, slots, closed_at)
        waiting = _Waiting(session, slots, len(pending), closed_at)
        self._waiting.add(waiting)
        now = self._clock()
        rows: list[PendingJudge] = []
        for i, task, key in pending:
            since, attempts = self.pending_since.pop(key, (now, 0))
            self._jobs.append(_Job(task, key, waiting, i, since, attempts))
            rows.append((key, session.key, session.revision, task.evaluation, since))
        if self._pending is not None:
            closed_unix = time.time() - (time.monotonic() - closed_at)
            self._pending.pending_add(
                rows, session, closed_unix if closed_at_unix is None else closed_at_unix
            )
        self._queued += len(pending)
        self.metrics.judge_queue.set(self._queued)
        if self._queued >= self.config.judge.max_queue:
            self._room.clear()
        self._start_workers()
        return None

    def _finished(
        self, session: Session, slots: list[EvaluationResult | JudgeTask], closed_at: float
    ) -> Evaluated:
        results = [s for s in slots if isinstance(s, EvaluationResult)]
        return Evaluated(Coverage(session, results, self.enabled), closed_at)

    # -- the queue -------------------------------------------------------------------------

    def _start_workers(self) -> None:
        while not self._stopping and self._jobs and len(self._workers) < self.config.judge.max_concurrency:
            worker = asyncio.create_task(self._work(), name="skillgauge-judge")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)

    async def _work(self) -> None:
        """Take judge work until none is left (or shutdown), waiting out backoffs."""
        while not self._stopping:
            if self._failures:
                await self._expire()
            if not self._jobs:
                return
            wait = self._hold_until - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            job = self._jobs.popleft()
            self._running += 1
            try:
                await self._run(job)
            finally:
                self._running -= 1

    async def _run(self, job: _Job) -> None:
        assert self._env is not None
        task = job.task
        watch = _Watch(self._env.judge)
        started = time.monotonic()
        try:
            result = await execute(task, replace(self._env, judge=watch))
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a bug must cost one row, not the session's account
            log.exception("judge evaluation %s failed", task.evaluation)
            result = unjudged(
                task.evaluation,
                task.session,
                "error",
                "judge_error",
                f"internal error: {err!r}",
                **task.where,
            )
            await self._final(job, result)
            return
        failure = watch.failure
        if failure is not None and failure.transient and watch.replies == 0:
            await self._failed(job, failure, started)
            return
        self._failures = 0
        self._hold_until = 0.0
        await self._final(job, result)

    async def _failed(self, job: _Job, failure: JudgeFailure, started: float) -> None:
        """A call that found no judge: the work waits (back at the head of the queue) unless
        it has waited ``judge.max_wait`` already.  Calls that were under way together count
        as one round of the backoff."""
        judge = self.config.judge
        job.attempts += 1
        job.last_error = str(failure)
        self.metrics.judge_failures.labels(failure.kind).inc()
        now = time.monotonic()
        if started >= self._failed_at:
            self._failures += 1
            self._failed_at = now
        delay = requeue_delay(self._failures, judge.requeue_backoff, judge.requeue_max_backoff)
        self._hold_until = max(self._hold_until, now + delay)
        self._warn_failure(
            "judge call failed (%s): %d judge evaluations wait; the next call in %.1fs, and work that "
            "waited judge.max_wait (%gs) becomes error/judge_unreachable_timeout",
            failure,
            self._queued,
            delay,
            judge.max_wait,
        )
        if self._clock() - job.queued_at >= judge.max_wait:
            await self._final(job, self._timed_out(job))
            return
        if self._pending is not None:
            self._pending.pending_failed(job.key, job.attempts, job.last_error)
        self._jobs.appendleft(job)

    async def _expire(self) -> None:
        """While the judge fails: work that waited ``judge.max_wait`` gets its final row."""
        limit = self._clock() - self.config.judge.max_wait
        if not any(job.queued_at <= limit for job in self._jobs):
            return
        expired = [job for job in self._jobs if job.queued_at <= limit]
        self._jobs = deque(job for job in self._jobs if job.queued_at > limit)
        for job in expired:
            await self._final(job, self._timed_out(job))

    def _timed_out(self, job: _Job) -> EvaluationResult:
        waited = self._clock() - job.queued_at
        return unjudged(
            job.task.evaluation,
            job.task.session,
            "error",
            "judge_unreachable_timeout",
            f"the judge could not be reached or had no capacity for {waited:.1f}s (judge.max_wait "
            f"{self.config.judge.max_wait:g}s, {job.attempts} calls failed); last: {job.last_error or 'none'}",
            **job.task.where,
        )

    async def _final(self, job: _Job, result: EvaluationResult) -> None:
        """A job's final row: committed, noted done, put in its slot; the session's account
        is handed on when it was the last."""
        if self._store is not None:
            try:
                await self._store(result)
            except Exception as err:  # a full disk: the verdict still counts, once
                log.warning(
                    "judge verdict %s could not be committed (%s): it is recorded with its session, "
                    "but a crash before that would ask the judge again",
                    result.key,
                    err,
                )
        if self._pending is not None:
            if not self._done:  # one statement for every row finished in this turn of the loop
                asyncio.get_running_loop().call_soon(self._flush_done)
            self._done.append(job.key)
        self._queued -= 1
        self.metrics.judge_queue.set(self._queued)
        if self._queued < self.config.judge.max_queue:
            self._room.set()
        owner = job.owner
        owner.slots[job.index] = result
        owner.remaining -= 1
        if owner.remaining == 0 and owner in self._waiting:
            self._deliver(owner)

    def _flush_done(self) -> None:
        done, self._done = self._done, []
        if self._pending is not None:
            self._pending.pending_done(done)

    def _deliver(self, owner: _Waiting) -> None:
        self._waiting.discard(owner)
        finished = self._finished(owner.session, owner.slots, owner.closed_at)
        delivery = asyncio.create_task(self.next.consume(finished), name="skillgauge-evaluated")
        self._delivering.add(delivery)
        delivery.add_done_callback(self._delivering.discard)

    # -- draining ----------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return self._queued

    async def drain(self, timeout: float = 30.0, *, stopping: bool = False) -> None:
        """Wait for every session's judge work, at most ``timeout`` seconds.  Without a
        durable store, what is left at the deadline is recorded as ``skipped / shutdown``.
        With one, it goes on waiting; unless ``stopping`` (shutdown): then it stops at the
        deadline, or at once while the judge fails, and stays in the store for the next start."""
        deadline = time.monotonic() + timeout
        while self._waiting and time.monotonic() < deadline:
            if stopping and self._durable and self._failures:
                break  # waiting for a judge that fails helps nobody: the store keeps the work
            await asyncio.sleep(0.01)
        if self._waiting and (stopping or not self._durable):
            await self._stop(max(0.0, deadline - time.monotonic()))
        if self._delivering:
            await asyncio.wait(set(self._delivering), timeout=max(1.0, deadline - time.monotonic()))

    async def _stop(self, grace: float) -> None:
        self._stopping = True
        sessions, work = len(self._waiting), self._queued
        if self._durable:
            # Calls in flight end (each is billed: asking again after the restart would pay
            # twice); the work not started stays in the store.
            until = time.monotonic() + max(grace, 5.0)
            while self._running and time.monotonic() < until:
                await asyncio.sleep(0.01)
        for worker in list(self._workers):
            worker.cancel()
        if self._workers:
            await asyncio.wait(set(self._workers), timeout=5.0)
        left = [owner for owner in self._waiting if owner.remaining]
        if self._durable:
            log.info(
                "shutdown: %d judge evaluations of %d sessions wait in the store; the next start "
                "evaluates them",
                sum(owner.remaining for owner in left),
                len(left),
            )
            self._waiting.clear()
        else:
            log.warning(
                "drain: %d sessions (%d judge evaluations) still waiting for the judge; recording "
                "them as skipped",
                sessions,
                work,
            )
            for owner in left:
                for i, slot in enumerate(owner.slots):
                    if isinstance(slot, JudgeTask):
                        owner.slots[i] = _skipped(
                            slot, "shutdown", "still waiting for the judge when the collector shut down"
                        )
                owner.remaining = 0
                self._deliver(owner)
        self._jobs.clear()
        self._queued = 0
        self.metrics.judge_queue.set(0)
        self._room.set()
        self._stopping = False  # sessions planned after this are evaluated again

    async def shutdown(self, timeout: float) -> None:
        if self._leases is not None:  # nothing more taken over; what is held stays leased
            await self._leases.stop()
        await self.drain(timeout, stopping=True)
        await self.close()
        await self.next.shutdown(timeout)

    async def close(self) -> None:
        if self.judge is not None:
            await self.judge.close()


def _task_key(task: JudgeTask) -> str:
    where = task.where
    return result_key(
        task.session.key,
        task.session.revision,
        task.evaluation,
        where.get("skill"),
        where.get("span_id"),
    )


def _skipped(task: JudgeTask, reason: str, explanation: str) -> EvaluationResult:
    return unjudged(task.evaluation, task.session, "skipped", reason, explanation, **task.where)
