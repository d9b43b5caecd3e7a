"""A cap on the connections one OTLP/HTTP listener holds open.

aiohttp's server has no such cap: ``CappedSite`` is its ``TCPSite`` with every accepted
connection passed through a ``ConnectionCap``.  A connection is counted from the moment
it is handed to the HTTP protocol (after the TLS handshake, when there is one) until it
closes.  A connection beyond the cap is refused at once, before anything is read from
it: it is sent a fixed ``503 Service Unavailable`` with ``Retry-After: 1`` and
``Connection: close`` and closed.  A client that had already sent its request may see
the connection reset instead of the answer; OTLP exporters retry both.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
from collections.abc import Callable

from aiohttp import web
from prometheus_client import Counter, Gauge

from collector.telemetry import RateLimitedLog

log = logging.getLogger("skillgauge")

REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)


def beyond_open_files(limit: int, field: str) -> str | None:
    """A warning when ``limit`` connections cannot all be open: each needs a file
    descriptor, and the process's soft ``RLIMIT_NOFILE`` is below ``limit``; else None."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > limit:
        return None
    return (
        f"{field} is {limit} but this process may open only {soft} files (ulimit -n): accepts will"
        f" fail before the cap is reached - raise the limit (ulimit -n, LimitNOFILE=) or lower {field}"
    )


class ConnectionCap:
    """At most ``limit`` connections open at once; ``open`` and ``refused`` are the
    operator's view of it, and a refusal is logged at WARN at most once a minute."""

    def __init__(self, limit: int, field: str, open_gauge: Gauge, refused: Counter) -> None:
        self.limit = limit
        self.field = field  # the config field that sets ``limit``, named in the warning
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
                "OTLP/HTTP: refused a connection from %s: %d connections are open, the %s limit"
                " - raise it or spread clients over more instances",
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
