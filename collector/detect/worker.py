"""Detection in a child process: ``WorkerDetection`` here, ``InlineDetection`` there.

Detection is most of what a span costs, and one interpreter runs Python on one core at a
time.  ``serve`` therefore hands each spooled request to a child process, with the session
the assembler placed each item in, and gets each closed ``Session`` back.  The assembler
(keys, binding, closing, revisions, durability) stays in the serving process, so a child
that dies loses nothing the spool does not hold: the server stops, and a restart replays.

Messages go one way each, in order, over two pipes (``multiprocessing`` connections), in
lists of whatever is waiting (one write and one wake-up for many messages).  A request's
bytes end a list: the list names their size, and they follow it unframed, read straight
into a buffer the child keeps (pickled inside the list, ~1 MB was copied four times on the
way in: 0.7-0.9 ms of the child's CPU a request, against ~0.3 now):

  to the child    ("items", request number, signal, size or None, [(index, key), ...], last)
                  ("fold", provisional, into)  ("finish", key, revision, reason, keep)
                  ("reopen", key)  ("forget", key)  ("ask", token, key)
  from the child  ("read", n): the bytes of n more requests were read (sent at once)
                  ("session", Session, reason)
                  ("answer", token, skill loads or None)
                  ("failed", "finish" or "ask", key or token): it raised (logged there)

A request's bytes cross once, with its first items; later items of the same request (it
was paused, or a session closed in its middle) name it by number.  Pickling and pipe
writes happen on a sender thread, so the event loop never waits for the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.config import Expectation
from collector.detect.child import Requests, handle
from collector.detect.expectations import Rules
from collector.detect.stage import Batch, InlineDetection, OnFinished, Signal
from collector.interpreter import DETECTION_GC_THRESHOLDS, child_env
from collector.spans import Attributes, EventField

log = logging.getLogger("skillgauge")

_STOP: Any = None  # on the sender's queue: close the pipe, which ends the child
_BATCH = 256  # messages per write, at most
_PER_TURN = 8  # replies handled per turn of the event loop
_PIPE_BYTES = 1 << 20  # pipe buffers (Linux's default limit for one): the writer rarely waits


def _widen(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError):
        pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default buffer works too


class WorkerDetection:
    """The ``Detection`` interface, served by a child process (see the module doc)."""

    reads_spans = False  # the child reads the request's own bytes

    def __init__(self, on_finished: OnFinished, expectations: tuple[Expectation, ...]) -> None:
        self._on_finished = on_finished
        self._expectations = expectations
        self._outgoing: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests = itertools.count(1)
        self._batches: list[_WorkerBatch] = []  # begun, with items not yet sent
        self._answers: dict[int, asyncio.Future[int | None]] = {}
        self._tokens = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._idle = asyncio.Event()
        # Requests sent, and requests whose bytes the child has read: the reader thread counts
        # those as they arrive, so the backlog (and backpressure) never waits for the loop.
        self._sent = 0
        self._read = 0
        self.finishing = 0  # sessions closed, not yet delivered back
        self.lost = False
        self._stopping = False  # the pipe to the child was closed on purpose

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the child, and the threads that write to and read from it."""
        self._loop = asyncio.get_running_loop()
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        _widen(from_parent)
        _widen(from_child)
        self._child = subprocess.Popen(
            [sys.executable, "-m", "collector.detect.worker", str(to_child), str(from_child)],
            pass_fds=(to_child, from_child),
            env=child_env(),
        )
        os.close(to_child)
        os.close(from_child)
        writer = Connection(from_parent, readable=False)
        reader = Connection(to_parent, writable=False)
        writer.send(self._expectations)  # first and alone; batches follow from the sender thread
        threading.Thread(
            target=self._send_forever, args=(writer,), name="skillgauge-detect-send", daemon=True
        ).start()
        threading.Thread(
            target=self._read_forever, args=(reader,), name="skillgauge-detect-read", daemon=True
        ).start()

    @property
    def backlog(self) -> int:
        """Requests sent whose bytes the child has not read yet."""
        return self._sent - self._read

    async def started(self, timeout: float = 30.0) -> None:
        """Return once the child answers (its imports done), so that ready means ready."""
        try:
            await self._ask("", timeout)
        except TimeoutError:
            raise RuntimeError(f"the detection worker did not answer within {timeout:g}s") from None
        assert self._child is not None
        log.info("detection runs in a worker process (pid %d)", self._child.pid)

    async def stop(self, timeout: float = 10.0) -> None:
        """Let the child finish what it was sent, then end it."""
        await self.settle(timeout)
        self._stopping = True
        self._outgoing.put(_STOP)
        child = self._child
        if child is not None:
            try:
                await asyncio.to_thread(child.wait, timeout)
            except subprocess.TimeoutExpired:
                log.error("the detection worker (pid %d) did not exit; killing it", child.pid)
                child.kill()

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait until every request sent has been read and every closed session delivered."""
        self._flush()
        deadline = asyncio.get_running_loop().time() + timeout
        while (self.backlog or self.finishing) and not self.lost:
            self._idle.clear()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                log.warning("detection worker: %d sessions still being finished", self.finishing)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), remaining)

    def _send_forever(self, connection: Connection) -> None:
        outgoing = self._outgoing
        try:
            while True:
                # Whatever is waiting, up to and including one request's bytes (~1 MB, the
                # pipe's size): a list of several requests made the child wait for this thread
                # to refill the pipe in mid-message, ~7 % of its time at saturation.
                messages = [outgoing.get()]
                while not _carries_bytes(messages[-1]) and not outgoing.empty() and len(messages) < _BATCH:
                    messages.append(outgoing.get())
                if messages[-1] is _STOP:
                    connection.send(messages[:-1])
                    return
                if _carries_bytes(messages[-1]):  # its size in the list, its bytes after it
                    *head, (kind, number, signal_name, raw, pairs, last) = messages
                    connection.send([*head, (kind, number, signal_name, len(raw), pairs, last)])
                    _write_all(connection.fileno(), raw)
                else:
                    connection.send(messages)
        except OSError:
            pass  # the child is gone; the reader reports it
        finally:
            connection.close()

    def _read_forever(self, connection: Connection) -> None:
        loop = self._loop
        assert loop is not None
        try:
            while True:
                messages = connection.recv()
                self._read += sum(message[1] for message in messages if message[0] == "read")
                loop.call_soon_threadsafe(self._received, messages)
        except (EOFError, OSError):
            child = self._child
            if child is not None:  # the pipe closes as the child exits: wait for its code
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=1.0)
            # The loop may be closed already: the server stopped before the child was reaped.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._gone)
        finally:
            connection.close()

    def _received(self, messages: list[Any]) -> None:
        # A few closed sessions per turn of the loop: evaluating a batch of hundreds at once
        # would hold the loop (and the GIL the receivers need) for tens of milliseconds.
        if len(messages) > _PER_TURN:
            assert self._loop is not None
            self._loop.call_soon(self._received, messages[_PER_TURN:])
            messages = messages[:_PER_TURN]
        for message in messages:
            kind = message[0]
            if kind == "session":
                self.finishing -= 1
                self._on_finished(message[1], message[2])
            elif kind == "answer":
                self._answer(message[1], message[2])
            elif kind == "failed":  # the worker logged why; a revision stays unfinished
                if message[1] == "finish":
                    self.finishing -= 1
                else:
                    self._answer(message[2], None)
        if not (self.backlog or self.finishing):
            self._idle.set()

    def _answer(self, token: int, value: int | None) -> None:
        future = self._answers.pop(token, None)
        if future is not None and not future.done():
            future.set_result(value)

    def _gone(self) -> None:
        child = self._child
        code = child.poll() if child is not None else None
        # Unless this process closed the pipe, the child's end means it died, whatever it had
        # in hand (a killed child's exit code may not be known yet when its pipe closes).
        if not self._stopping or self.backlog or self.finishing or code not in (0, None):
            self.lost = True
            log.error(
                "the detection worker exited (code %s) with %d requests and %d sessions in hand; "
                "stopping, so that a restart rebuilds them from the spool",
                code,
                self.backlog,
                self.finishing,
            )
            os.kill(os.getpid(), signal.SIGTERM)
        self._idle.set()

    # -- the Detection interface -------------------------------------------------------------

    def begin(self, signal: Signal, request: Message, raw: bytes | None) -> Batch:
        batch = _WorkerBatch(self, next(self._requests), signal, request, raw)
        self._batches.append(batch)
        return batch

    def _flush(self) -> None:
        """Send the items handed over so far, so a message that follows finds them read."""
        for batch in self._batches:
            batch.send(last=False)

    def _send(self, message: tuple[Any, ...]) -> None:
        self._flush()
        self._outgoing.put(message)

    def fold(self, provisional: str, into: str) -> None:
        self._send(("fold", provisional, into))

    def finish(self, key: str, revision: int, reason: str, keep: bool) -> None:
        if self.lost:
            return  # recorded as closed, not evaluated: a restart evaluates it
        self.finishing += 1
        self._send(("finish", key, revision, reason, keep))

    def reopen(self, key: str) -> None:
        self._send(("reopen", key))

    def forget(self, key: str) -> None:
        self._send(("forget", key))

    async def skill_loads(self, key: str) -> int | None:
        if self.lost or self._loop is None:
            return None
        return await self._ask(key, 10.0)

    async def _ask(self, key: str, timeout: float) -> int | None:
        assert self._loop is not None
        token = next(self._tokens)
        future: asyncio.Future[int | None] = self._loop.create_future()
        self._answers[token] = future
        self._send(("ask", token, key))
        return await asyncio.wait_for(future, timeout)


class _WorkerBatch:
    __slots__ = ("_items", "_raw", "_request", "_worker", "number", "signal")

    def __init__(
        self, worker: WorkerDetection, number: int, signal: Signal, request: Message, raw: bytes | None
    ) -> None:
        self._worker = worker
        self.number = number
        self.signal = signal
        self._request: Message | None = request
        self._raw = raw
        self._items: list[tuple[int, str]] = []

    def resource(self, resource: Resource, attrs: Attributes | None = None) -> None:
        pass  # the child walks the request itself

    def span(
        self,
        key: str,
        index: int,
        span: Span | None,
        scope: str,
        attrs: Attributes | None = None,
        events: list[EventField] | None = None,
    ) -> None:
        self._items.append((index, key))

    def log(self, key: str, index: int, record: LogRecord, scope: str) -> None:
        self._items.append((index, key))

    def end(self) -> None:
        self.send(last=True)
        self._worker._batches.remove(self)

    def send(self, last: bool) -> None:
        if not (self._items or last):
            return
        raw = None
        if self._request is not None:  # the first message of this request carries it
            raw = self._raw if self._raw is not None else self._request.SerializeToString()
            self._request = self._raw = None
            self._worker._sent += 1
        self._worker._outgoing.put(("items", self.number, self.signal, raw, self._items, last))
        self._items = []


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_into(fd: int, view: memoryview) -> None:
    """Fill ``view`` from ``fd``: straight into the buffer, no chunk objects on the way."""
    while view:
        count = os.readv(fd, [view])
        if not count:
            raise EOFError
        view = view[count:]


def _carries_bytes(message: Any) -> bool:
    """Whether a message carries a request's bytes (in the parent, the bytes; on the pipe and
    in the child until they are read, their size)."""
    return message is not _STOP and message[0] == "items" and message[3] is not None


# -- the child --------------------------------------------------------------------------------


def serve_child(inbox: Connection, outbox: Connection) -> None:
    """Run detection for the parent until it closes the pipe."""
    expectations: tuple[Expectation, ...] = inbox.recv()
    replies: list[tuple[Any, ...]] = []
    detection = InlineDetection(
        lambda session, reason: replies.append(("session", session, reason)), Rules.compile(expectations)
    )
    requests: Requests = {}  # begun, not ended
    buffer = bytearray(1 << 20)  # the request being read: grown to the largest, never shrunk
    gc.freeze()  # the modules just imported: no collection need scan them again
    while True:
        try:
            messages = inbox.recv()
            if messages and _carries_bytes(messages[-1]):
                kind, number, signal_name, size, pairs, last = messages[-1]
                if size > len(buffer):
                    buffer = bytearray(size)
                raw = memoryview(buffer)[:size]
                _read_into(inbox.fileno(), raw)
                messages[-1] = (kind, number, signal_name, raw, pairs, last)
        except EOFError:
            return
        # Say at once what was read, not after the work: the parent refuses new requests
        # while too many wait to be read, and an answer held behind a batch's work (and the
        # parent's loop) left this process idle 9 % of the time at saturation.
        read = sum(map(_carries_bytes, messages))
        if read:
            outbox.send([("read", read)])
        for message in messages:
            try:
                handle(message, detection, requests, replies)
            except Exception:  # one bad message must not stop detection for every session
                # The kind only: keys and numbers come from agents, and this log is not escaped.
                log.exception("detection worker: handling a %r message failed", message[0])
                if message[0] in ("finish", "ask"):  # the parent counts on an answer
                    replies.append(("failed", message[0], message[1]))
        if replies:  # one write per batch received
            outbox.send(replies)
            replies.clear()


def main(argv: list[str]) -> int:
    # The parent decides when this process ends (it closes the pipe once every session is
    # delivered); a Ctrl-C or SIGTERM sent to the whole process group must not cut it short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s detection worker: %(message)s")
    gc.set_threshold(*DETECTION_GC_THRESHOLDS)
    serve_child(Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
