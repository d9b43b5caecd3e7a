"""Evaluate closed sessions and hand each finished account (``Coverage``) onwards.

``submit`` is called from the assembler's close callback and must not block: the
evaluators plan the session at once (deterministic rows, not-applicable and skipped rows
are final), and the judge work runs as tasks, at most ``judge.max_concurrency`` at a time,
their calls made on this event loop.
A session's ``Coverage`` is delivered once, when all of its rows are in.  The judge queue
is bounded (``judge.max_queue``): beyond it a judge evaluation becomes ``skipped /
queue_full``, never dropped.  ``drain`` waits for the work in flight (shutdown, end of
replay); what is still running at its deadline is recorded as ``skipped / shutdown``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from collector.component import Consumer
from collector.evaluate.config import Defaults, Evaluation
from collector.evaluate.execute import execute
from collector.evaluate.judge import judge_env
from collector.evaluate.metrics import EvaluateMetrics
from collector.state.recorder import Evaluated
from evaluators import suite
from evaluators.evidence import Session
from evaluators.judge.base import Judge
from evaluators.judge.verdicts import Level, Scale
from evaluators.plan import CustomSpec, JudgeTask, Policy, Settings
from evaluators.registry import SkillRegistry, load_registry
from evaluators.result import Coverage, EvaluationResult, result_key, unjudged

log = logging.getLogger("skillgauge")

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
    ) -> None:
        self.next = next
        # Exactly once: every judge verdict is committed (``store``) as soon as it arrives, and
        # verdicts committed before a restart (``recovered``, by idempotency key) are reused
        # instead of asking the judge again.
        self._store = store
        self.recovered: dict[str, dict[str, Any]] = {}
        self.config = config or Defaults()
        self.metrics = metrics or EvaluateMetrics(CollectorRegistry())
        self.registry = load_registry(self.config.skills.paths)  # validated with the config
        self._env = judge_env(self.config, self.metrics, judge, clock)
        self.judge = self._env.judge if self._env is not None else None
        self.settings = settings_from(self.config, self.registry, self._env is not None)
        # The judge evaluations configured on, named in every coverage line.
        self.enabled = tuple(name for name in suite.JUDGE_EVALUATIONS if self.settings.policy(name).enabled)
        self.metrics.skill_labels.reserve([s.name for s in self.registry.skills.values()])
        self._in_flight: set[asyncio.Task[None]] = set()
        self._calls: set[asyncio.Task[EvaluationResult]] = set()
        self._semaphore = asyncio.Semaphore(self.config.judge.max_concurrency)
        self._queued = 0
        if len(self.registry):
            log.info(
                "skills registry: %d skills from %s (%s)",
                len(self.registry),
                ", ".join(self.config.skills.paths),
                ", ".join(sorted(s.name for s in self.registry.skills.values())),
            )

    async def consume(self, item: Session) -> None:
        """Plan the session's evaluations; hand its account on at once when no judge call is
        needed, else when the last call ends."""
        finished = self.submit(item)
        if finished is not None:
            await self.next.consume(finished)

    def submit(self, session: Session) -> Evaluated | None:
        """Plan a session; its account if it is already complete, else None (judge calls
        run as tasks, and the last one to end hands the account on)."""
        closed_at = time.monotonic()
        plan = suite.plan(session, self.settings)
        for skill in plan.body_mismatches:
            self.metrics.registry_body_mismatch.labels(self.metrics.skill_labels(skill)).inc()
        slots: list[EvaluationResult | JudgeTask] = list(plan.slots)
        pending: list[tuple[int, JudgeTask]] = []
        for i, slot in enumerate(slots):
            if not isinstance(slot, JudgeTask):
                continue
            earlier = self.recovered.pop(_task_key(slot), None)
            if earlier is not None:
                slots[i] = EvaluationResult.from_dict(earlier)
                self.metrics.judge_reused.inc()
            elif self._env is None:  # planned with a judge that is gone: cannot happen, but never drop
                slots[i] = _skipped(slot, "no_judge_configured", "no judge is configured")
            elif self._queued >= self.config.judge.max_queue:
                slots[i] = _skipped(
                    slot,
                    "queue_full",
                    f"the judge queue is full ({self.config.judge.max_queue} evaluations waiting or in flight)",
                )
            else:
                self._queued += 1
                pending.append((i, slot))
        if not pending:
            return self._finished(session, slots, closed_at)
        self.metrics.judge_queue.set(self._queued)
        calls = []
        for _, judge_task in pending:
            call = asyncio.create_task(self._judge(judge_task), name=f"judge {judge_task.evaluation}")
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)
            calls.append(call)
        finish = asyncio.create_task(self._gather(session, slots, pending, calls, closed_at))
        self._in_flight.add(finish)
        finish.add_done_callback(self._in_flight.discard)
        return None

    def _finished(
        self, session: Session, slots: list[EvaluationResult | JudgeTask], closed_at: float
    ) -> Evaluated:
        results = [s for s in slots if isinstance(s, EvaluationResult)]
        return Evaluated(Coverage(session, results, self.enabled), closed_at)

    async def _judge(self, task: JudgeTask) -> EvaluationResult:
        try:
            async with self._semaphore:
                assert self._env is not None
                result = await execute(task, self._env)
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
            return result
        except asyncio.CancelledError:
            return _skipped(task, "shutdown", "still waiting for the judge when the collector shut down")
        except Exception as err:  # a bug must cost one row, not the session's account
            log.exception("judge evaluation %s failed", task.evaluation)
            return unjudged(
                task.evaluation,
                task.session,
                "error",
                "judge_error",
                f"internal error: {err!r}",
                **task.where,
            )
        finally:
            self._queued -= 1
            self.metrics.judge_queue.set(self._queued)

    async def _gather(
        self,
        session: Session,
        slots: list[EvaluationResult | JudgeTask],
        pending: list[tuple[int, JudgeTask]],
        calls: list[asyncio.Task[EvaluationResult]],
        closed_at: float,
    ) -> None:
        done = await asyncio.gather(*calls, return_exceptions=True)
        for (i, judge_task), outcome in zip(pending, done, strict=True):
            slots[i] = (
                outcome
                if isinstance(outcome, EvaluationResult)
                else _skipped(
                    judge_task, "shutdown", "still waiting for the judge when the collector shut down"
                )
            )
        await self.next.consume(self._finished(session, slots, closed_at))

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def queued(self) -> int:
        return self._queued

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for every session in flight; at the deadline, stop its judge calls (rows say so)."""
        if not self._in_flight:
            return
        _, late = await asyncio.wait(set(self._in_flight), timeout=timeout)
        if late:
            log.warning(
                "drain: %d sessions still waiting for the judge after %gs; recording them as skipped",
                len(late),
                timeout,
            )
            for call in list(self._calls):
                call.cancel()
            await asyncio.wait(late, timeout=5.0)

    async def shutdown(self, timeout: float) -> None:
        await self.drain(timeout)
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
