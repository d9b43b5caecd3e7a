"""Judge calls in a child process: ``JudgeWorker`` runs ``evaluators.judge.execute`` there.

The ``anthropic`` client spends 1-4 ms of CPU a call building the request, keeping its
connection pool and reading the reply into models.  At 100 sessions a second (two calls
each) that was two thirds of the serving process's event loop, which then fell behind on
everything else.  So ``serve`` hands each ``JudgeTask`` to a child with its own loop, client
and budgets, and gets the ``EvaluationResult`` back.  The runner keeps everything else:
planning, the queue and its bound, committing verdicts, reusing recovered ones, delivery.

Messages are pickles, each after its 4-byte length, on the child's stdin and stdout:

  to the child    the Config, first and alone; then (token, pickled task fields): the
                  evaluation, what a result names of the session (id, revision,
                  framework), the request, the rubric and where, pickled apart so that a
                  task the child cannot read fails alone
  from the child  ("ready",) once; then (token, result record or None, events): the
                  ``EvaluationResult.to_dict`` record, None when ``execute`` raised (logged
                  there); events are the observer's calls since the last message
                  (metrics: requests, tokens, spend), replayed here

Tasks and results cross as plain fields: their classes are compiled, frozen dataclasses,
which pickle but do not unpickle.

Closing the child's stdin ends it, abandoning calls in flight (their rows say ``shutdown``);
the death of the server (kill -9 included) ends it at once, on Linux, and elsewhere stops
it from starting calls whose verdicts no one could take.
A child that dies fails the calls it had (``error / judge_error``); the next task starts a
new one, at once the first time, then after 1, 2, 4 ... up to 30 s while children keep
dying within a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from collector.cli import setup_logging
from collector.config import Config
from collector.interpreter import child_env
from collector.judging import judge_env
from evaluators.evidence import Session
from evaluators.judge.base import JudgeObserver, JudgeRequest
from evaluators.judge.execute import JudgeEnv, execute
from evaluators.judge.verdicts import Rubric
from evaluators.plan import JudgeTask
from evaluators.result import EvaluationResult

log = logging.getLogger("skillgauge")

_LENGTH = struct.Struct(">I")
_YOUNG = 60.0  # a child that dies sooner than this counts as one more crash in a row
_MAX_RESTART_WAIT = 30.0  # seconds: restarts wait 1, 2, 4 ... s from the second crash in a row
Event = tuple[str, tuple[Any, ...]]  # (observer method, its arguments)


class JudgeWorkerError(RuntimeError):
    """The child could not evaluate a task (it raised, or it exited)."""


def _frame(message: Any) -> bytes:
    body = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(size))


TaskFields = tuple[str, str, int, str, JudgeRequest, Rubric, dict[str, Any]]


def _fields(task: JudgeTask) -> TaskFields:
    """The task without its session's evidence: the prompt already holds what the judge reads."""
    s = task.session
    return (
        task.evaluation,
        s.session_id,
        s.revision,
        s.framework,
        task.request,
        task.rubric,
        dict(task.where),
    )


def _task(fields: TaskFields) -> JudgeTask:
    evaluation, session_id, revision, framework, request, rubric, where = fields
    return JudgeTask(evaluation, Session(session_id, revision, framework), request, rubric, where)


class JudgeWorker:
    """``evaluate(task)``, served by a child process (see the module doc)."""

    def __init__(
        self, config: Config, observer: JudgeObserver, crashed: Callable[[], None] = lambda: None
    ) -> None:
        self._config = config
        self._observer = observer
        self._crashed = crashed  # a child ended without being stopped (counted on /metrics)
        self._tokens = itertools.count(1)
        # By token: the answer awaited, and the child the task went to (a new child can
        # start while the old one's exit is still being read).
        self._waiting: dict[int, tuple[asyncio.subprocess.Process, asyncio.Future[EvaluationResult]]] = {}
        self._child: asyncio.subprocess.Process | None = None
        self._stopped: asyncio.subprocess.Process | None = None  # ended on purpose
        self._reader: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        # Children that died young, in a row: each restart waits longer (a child that
        # crashes on every task must not be restarted as fast as tasks arrive).
        self._crashes = 0

    async def start(self, timeout: float = 30.0) -> None:
        """Start the child and return once it answers (its imports done)."""
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "collector.judge_worker",
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=child_env(),
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(_frame(self._config))
        try:
            await child.stdin.drain()
            ready = await asyncio.wait_for(_read_frame(child.stdout), timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as err:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            raise RuntimeError(f"the judge worker did not start: {err!r}") from None
        assert ready == ("ready",)
        self._child = child
        self._reader = asyncio.create_task(
            self._read_forever(child, time.monotonic()), name="skillgauge-judge-read"
        )
        log.info("judge calls run in a worker process (pid %d)", child.pid)

    async def stop(self, timeout: float = 10.0) -> None:
        """End the child; calls still in flight are abandoned (the runner drained first)."""
        child, self._child = self._child, None
        if child is None:
            return
        self._stopped = child
        assert child.stdin is not None
        child.stdin.close()
        try:
            await asyncio.wait_for(child.wait(), timeout)
        except TimeoutError:
            log.error("the judge worker (pid %d) did not exit; killing it", child.pid)
            child.kill()
            await child.wait()
        if self._reader is not None:
            await self._reader

    async def evaluate(self, task: JudgeTask) -> EvaluationResult:
        async with self._starting:
            if self._child is None or self._child.returncode is not None:
                if self._crashes > 1:
                    wait = min(_MAX_RESTART_WAIT, 2.0 ** (self._crashes - 2))
                    log.warning(
                        "the judge worker died %d times in a row; starting a new one in %gs",
                        self._crashes,
                        wait,
                    )
                    await asyncio.sleep(wait)
                await self.start()
        child = self._child
        assert child is not None and child.stdin is not None
        token = next(self._tokens)
        answer: asyncio.Future[EvaluationResult] = asyncio.get_running_loop().create_future()
        self._waiting[token] = (child, answer)
        try:
            child.stdin.write(_frame((token, pickle.dumps(_fields(task), pickle.HIGHEST_PROTOCOL))))
            try:
                await child.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):  # it died before its exit was read
                raise JudgeWorkerError("the judge worker exited before the task reached it") from None
            return await answer
        finally:
            self._waiting.pop(token, None)

    async def _read_forever(self, child: asyncio.subprocess.Process, started: float) -> None:
        assert child.stdout is not None
        try:
            while True:
                token, record, events = await _read_frame(child.stdout)
                for method, args in events:
                    getattr(self._observer, method)(*args)
                _, answer = self._waiting.get(token, (child, None))
                if answer is None or answer.done():
                    continue  # abandoned by the runner (shutdown)
                if record is None:
                    answer.set_exception(
                        JudgeWorkerError("the judge worker could not evaluate it (see its log)")
                    )
                else:
                    answer.set_result(EvaluationResult.from_dict(record))
        except (asyncio.IncompleteReadError, OSError):
            pass  # the child exited
        code = await child.wait()
        if self._child is child:
            self._child = None
        if child is not self._stopped:
            self._crashes = self._crashes + 1 if time.monotonic() - started < _YOUNG else 1
            self._crashed()
            log.error(
                "the judge worker (pid %d) exited with code %d; the next judge call starts a new one",
                child.pid,
                code,
            )
        for went_to, answer in self._waiting.values():
            if went_to is child and not answer.done():
                answer.set_exception(
                    JudgeWorkerError(f"the judge worker exited (code {code}) during the call")
                )


# -- the child --------------------------------------------------------------------------------


class _Events:
    """A ``JudgeObserver`` that keeps its calls until the next message carries them."""

    def __init__(self) -> None:
        self.pending: list[Event] = []

    def request(self, model: str, outcome: str, latency_s: float) -> None:
        self.pending.append(("request", (model, outcome, latency_s)))

    def billed(self, model: str, kind: str, tokens: int) -> None:
        self.pending.append(("billed", (model, kind, tokens)))

    def spent(self, model: str, usd: float) -> None:
        self.pending.append(("spent", (model, usd)))

    def take(self) -> list[Event]:
        taken, self.pending = self.pending, []
        return taken


async def _serve(inbox: asyncio.StreamReader, outbox: int, parent: int) -> None:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(outbox, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    config: Config = await _read_frame(inbox)
    setup_logging(config.log_level, "judge worker")
    events = _Events()
    env = judge_env(config, events, clock=time.time)
    if env is None:
        raise SystemExit("the judge worker was started without a judge configured")
    calls: set[asyncio.Task[None]] = set()

    async def evaluate(token: int, fields: bytes, env: JudgeEnv) -> None:
        record: dict[str, Any] | None
        try:
            record = (await execute(_task(pickle.loads(fields)), env)).to_dict()
        except Exception:  # one bad task must not stop the others
            log.exception("judge task %d failed", token)
            record = None
        writer.write(_frame((token, record, events.take())))

    writer.write(_frame(("ready",)))
    try:
        while True:
            try:
                token, fields = await _read_frame(inbox)
            except asyncio.IncompleteReadError:
                return  # the parent closed our stdin
            if os.getppid() != parent:
                return  # the server died: no one can take the verdict; its restart asks again
            call = asyncio.create_task(evaluate(token, fields, env))
            calls.add(call)
            call.add_done_callback(calls.discard)
    finally:
        for call in calls:
            call.cancel()
        await env.judge.close()
        transport.close()


async def _main(parent: int) -> None:
    # The protocol owns stdout: keep a descriptor for it, and send stray prints to stderr.
    outbox = os.dup(1)
    os.dup2(2, 1)
    inbox = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(inbox), os.fdopen(0, "rb", buffering=0)
    )
    await _serve(inbox, outbox, parent)


def _die_with(parent: int) -> None:
    """End this process when the server dies (kill -9 included): a call made for a dead server
    is paid for and thrown away, and its restart makes it again.  Linux only; elsewhere the
    parent check in ``_serve`` and stdin's end stop new calls."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)


def main() -> int:
    # The parent decides when this process ends (it closes stdin once it has drained); a
    # Ctrl-C or SIGTERM sent to the whole process group must not cut it short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    _die_with(parent)
    asyncio.run(_main(parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
