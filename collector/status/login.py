"""Page login for the /ui/ pages, as web apps do it.

``POST /ui/login`` with the bearer token starts a page session: the cookie holds only its
id (random, 256 bits; HttpOnly, SameSite=Strict, path /ui/, Secure on TLS), never the
token, and the session ends at ``POST /ui/logout``, ``SESSION_SECONDS`` after the login,
or when the process stops.  Both posts must come from a page of this listener: their
``Origin`` (else ``Referer``) must name the host and port the request was sent to (the
scheme is not compared, so a TLS-terminating proxy in front still works); anything else,
or neither header, is refused 403.

Failed logins are counted (``skillgauge_status_rejected_requests_total{endpoint="ui",
reason="login_failed"}``), logged at WARN at most once a minute with a count, and slowed
per client address: each client may fail ``BURST`` times, then once every
``REFILL_SECONDS``; beyond that it is answered 429 with ``Retry-After`` without its token
being looked at (``reason="login_throttled"``).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from collector.receiver.auth import Bearer
from collector.status import pages
from collector.status.view import StatusView
from collector.telemetry import RateLimitedLog

log = logging.getLogger("skillgauge")

COOKIE = "skillgauge_session"
SESSION_SECONDS = 12 * 3600.0
MAX_SESSIONS = 10_000  # page sessions held; beyond, the oldest ends
BURST = 10  # failed logins a client may make at once
REFILL_SECONDS = 6.0  # then one more each this often
MAX_CLIENTS = 10_000  # clients whose failures are remembered; beyond, the longest quiet is forgotten
FOREIGN = "a login or logout must be posted from a page of this status API (its Origin or Referer)"


@dataclass(slots=True)
class _Session:
    token: str
    expires: float


@dataclass(slots=True)
class _Allowance:
    left: float
    at: float


class Throttle:
    """Failed attempts per client: ``burst`` at once, then one each ``refill`` seconds."""

    def __init__(
        self, burst: int = BURST, refill: float = REFILL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._burst = burst
        self._refill = refill
        self._clock = clock
        self._clients: OrderedDict[str, _Allowance] = OrderedDict()

    def _allowance(self, client: str) -> _Allowance:
        now = self._clock()
        allowance = self._clients.get(client)
        if allowance is None:
            allowance = _Allowance(float(self._burst), now)
        else:
            allowance.left = min(float(self._burst), allowance.left + (now - allowance.at) / self._refill)
            allowance.at = now
        self._clients[client] = allowance
        self._clients.move_to_end(client)
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)
        return allowance

    def wait(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        allowance = self._allowance(client)
        return 0.0 if allowance.left >= 1 else (1 - allowance.left) * self._refill

    def failed(self, client: str) -> None:
        self._allowance(client).left -= 1


class PageLogin:
    """The login form, ``POST /ui/login``, ``POST /ui/logout``, and ``credentials``: what
    the bearer middleware reads for a request (its ``Authorization`` header, else for a page
    the token of the page session its cookie names)."""

    def __init__(
        self, bearer: Bearer, view: StatusView, tls: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bearer = bearer
        self._view = view
        self._tls = tls
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # oldest first
        self.throttle = Throttle(clock=clock)
        self._failures = RateLimitedLog(log, logging.WARNING, 60.0)

    def credentials(self, request: web.Request) -> str | None:
        header = request.headers.get("Authorization")
        if header is not None or not (request.path == "/ui" or request.path.startswith("/ui/")):
            return header
        session = self._session(request)
        return f"Bearer {session.token}" if session is not None else None

    def _session(self, request: web.Request) -> _Session | None:
        sid = request.cookies.get(COOKIE)
        session = self._sessions.get(sid) if sid else None
        if session is not None and session.expires <= self._clock():
            del self._sessions[sid]  # type: ignore[arg-type]
            return None
        return session

    async def form(self, _: web.Request) -> web.Response:
        return pages.render("login.html", failed=False)

    async def login(self, request: web.Request) -> web.Response:
        if not _same_origin(request):
            self._view.count_refusal("ui", "foreign_origin")
            return web.Response(status=403, text=FOREIGN)
        client = request.remote or "?"
        wait = self.throttle.wait(client)
        if wait > 0:
            self._view.count_refusal("ui", "login_throttled")
            self._warn(client)
            return web.Response(
                status=429,
                text="too many failed logins from this address: try again later",
                headers={"Retry-After": str(max(1, round(wait)))},
            )
        token = str((await request.post()).get("token", "")).strip()
        if not self._bearer.allows(f"Bearer {token}"):
            self.throttle.failed(client)
            self._view.count_refusal("ui", "login_failed")
            self._warn(client)
            response = pages.render("login.html", failed=True)
            response.set_status(401)
            return response
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = _Session(token, self._clock() + SESSION_SECONDS)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        response = web.Response(status=303, headers={"Location": "/ui/"})
        response.set_cookie(COOKIE, sid, path="/ui/", httponly=True, samesite="Strict", secure=self._tls)
        return response

    async def logout(self, request: web.Request) -> web.Response:
        if not _same_origin(request):
            self._view.count_refusal("ui", "foreign_origin")
            return web.Response(status=403, text=FOREIGN)
        sid = request.cookies.get(COOKIE)
        if sid:
            self._sessions.pop(sid, None)
        response = web.Response(status=303, headers={"Location": "/ui/login"})
        response.del_cookie(COOKIE, path="/ui/")
        return response

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def _warn(self, client: str) -> None:
        self._failures("status: failed or throttled page login from %s", client)


def _same_origin(request: web.Request) -> bool:
    """Whether the request's ``Origin`` (else ``Referer``) names the host and port it was sent to."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source or source == "null":
        return False
    try:
        netloc = urlsplit(source).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == request.host.lower()
