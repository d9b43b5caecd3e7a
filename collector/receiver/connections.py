"""Caps on the connections each listener holds open, fitted under the open-file limit, and
accept errors logged once an interval.

aiohttp's server has no such cap: ``CappedSite`` is its ``TCPSite`` with every accepted
connection passed through a ``ConnectionCap``.  A connection is counted from the moment
it is handed to the HTTP protocol (after the TLS handshake, when there is one) until it
closes.  A connection beyond the cap is refused at once, before anything is read from
it: it is sent a fixed ``503 Service Unavailable`` with ``Retry-After: 1`` and
``Connection: close`` and closed.  A client that had already sent its request may see
the connection reset instead of the answer; OTLP exporters retry both.  (gRPC core caps
its own listener: ``receiver.grpc.server_options``.)

``fit_to_open_files`` lowers the caps when together they could use up the process's file
descriptors, so that the store, the log and the status API always have some.  When accepts
fail all the same (EMFILE, ENFILE, ENOBUFS, ENOMEM), asyncio stops accepting on that
listener for a second and retries; ``AcceptErrors`` logs it once a minute with a count,
without a traceback, instead of once per failure.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Gauge

from collector.telemetry import RateLimitedLog

log = logging.getLogger("skillgauge")

REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)


# Descriptors the process needs besides its connections: the store and its segments, the
# lock, the log, the event loop's, gRPC core's own, outgoing export and judge connections.
RESERVED_FILES = 128


def open_files_limit(wanted: int = 0) -> int | None:
    """The process's soft ``RLIMIT_NOFILE`` (None when unlimited), first raised towards
    ``wanted`` as far as the hard limit allows (as Go programs do at start): a service
    manager's default soft limit of 1024 is not what the operator chose."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted and (hard == resource.RLIM_INFINITY or hard > soft):
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    return None if soft == resource.RLIM_INFINITY else soft


def fit_to_open_files(caps: dict[str, int], limit: int | None) -> tuple[dict[str, int], list[str]]:
    """Each listener's connection cap (config field -> cap), lowered in proportion when
    together with ``RESERVED_FILES`` they exceed ``limit`` open files, and a warning for each
    cap lowered.  Every cap stays at least 1."""
    wanted = sum(caps.values())
    if limit is None or wanted + RESERVED_FILES <= limit:
        return dict(caps), []
    room = max(len(caps), limit - RESERVED_FILES)
    fitted = {field: max(1, cap * room // wanted) for field, cap in caps.items()}
    warnings = [
        f"{field} is {cap} but this process may open only {limit} files (ulimit -n), {RESERVED_FILES}"
        f" of them kept for its own files: lowered to {fitted[field]} - raise the limit (ulimit -n,"
        f" LimitNOFILE=) or lower {field}"
        for field, cap in caps.items()
        if fitted[field] < cap
    ]
    return fitted, warnings


_ACCEPT_FAILED = "socket.accept() out of system resource"


class AcceptErrors:
    """An event loop exception handler: a failed accept (asyncio pauses that listener for a
    second, then retries) is logged at ERROR at most once per ``every`` seconds, with the
    count of failures since the last line and no traceback; anything else goes to
    ``fallback`` (the loop's default handler)."""

    def __init__(self, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = 0  # since the start
        self._log = RateLimitedLog(log, logging.ERROR, every, clock)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        self.failures += 1
        error = context.get("exception")
        try:
            where = context["socket"].getsockname()
        except (KeyError, OSError):
            where = "?"
        self._log(
            "cannot accept connections on %s: %s - retrying each second; raise the open-file limit"
            " (ulimit -n, LimitNOFILE=) or lower the listeners' max_connections",
            where,
            error.strerror if isinstance(error, OSError) and error.strerror else error,
        )


class ConnectionCap:
    """At most ``limit`` connections open at once; ``open`` and ``refused`` are the
    operator's view of it, and a refusal is logged at WARN at most once a minute."""

    def __init__(
        self, limit: int, field: str, open_gauge: Gauge, refused: Counter, what: str = "OTLP/HTTP"
    ) -> None:
        self.limit = limit
        self.field = field  # the config field that sets ``limit``, named in the warning
        self.what = what  # the listener, as the warning names it
        self.open = 0
        self._gauge = open_gauge
        self._refused = refused
        self._warn = RateLimitedLog(log, logging.WARNING, 60.0)

    def protocols(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for ``loop.create_server``: ``make``'s protocols, capped."""
        return lambda: _Capped(self, make)

    def _take(self, transport: asyncio.BaseTransport) -> bool:
        if self.open >= self.limit:
            self._refused.inc()
            peer = transport.get_extra_info("peername")
            self._warn(
                "%s: refused a connection from %s: %d connections are open, the %s limit"
                " - raise it or spread clients over more instances",
                self.what,
                peer[0] if isinstance(peer, tuple) else peer,
                self.open,
                self.field,
            )
            return False
        self.open += 1
        self._gauge.inc()
        return True

    def _release(self) -> None:
        self.open -= 1
        self._gauge.dec()


class _Capped(asyncio.Protocol):
    """The HTTP protocol of one connection, made only once the cap admits the connection."""

    __slots__ = ("_cap", "_inner", "_make")

    def __init__(self, cap: ConnectionCap, make: Callable[[], asyncio.Protocol]) -> None:
        self._cap = cap
        self._make = make
        self._inner: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._cap._take(transport):
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(REFUSAL)
            transport.close()  # after the answer is flushed
            return
        self._inner = self._make()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._cap._release()
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:  # what a refused client sends is dropped unread
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


class CappedSite(web.BaseSite):
    """aiohttp's ``TCPSite`` (host, port, TLS, ``SO_REUSEADDR``) whose connections pass
    through ``cap``."""

    __slots__ = ("_cap", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        cap: ConnectionCap,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self._cap = cap

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None  # the runner is set up before a site is made
        self._server = await asyncio.get_running_loop().create_server(
            self._cap.protocols(server),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
        )
