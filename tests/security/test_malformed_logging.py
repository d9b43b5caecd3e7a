"""Malformed HTTP requests, refused before any auth, cost one log line a minute with a
count, never a traceback each."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

from aiohttp.http_exceptions import BadHttpMessage
from support import Server

from collector.logsafety import MalformedRequests

BAD = (
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuth orization: Bearer guess\r\n\r\n"  # a space in a header name
)


def _send_bad(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(BAD)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


def test_a_flood_of_malformed_requests_is_one_warning_without_a_traceback(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"auth": {"bearer_token": "right-token-0123456789"}, "status": {"auth": "none"}})
    try:
        for port in (srv.http_port, srv.status_port):
            for _ in range(250):
                assert b" 400 Bad Request\r\n" in _send_bad(port)
        log = srv.log()
        lines = [line for line in log.splitlines() if "malformed HTTP request" in line]
        assert len(lines) == 1 and "WARNING" in lines[0] and "answered 400 and closed" in lines[0]
        assert "Traceback" not in log and "ERROR" not in log
        assert len(log) < 20_000
    finally:
        srv.stop()


def test_the_next_line_says_how_many_were_not_logged() -> None:
    now = [0.0]
    quiet = MalformedRequests(every=60.0, clock=lambda: now[0])
    written = []
    for second in range(121):
        now[0] = float(second)
        try:
            raise BadHttpMessage("Invalid header token:\n\n    b'x y'")
        except BadHttpMessage:
            record = logging.LogRecord(
                "aiohttp.server",
                logging.ERROR,
                __file__,
                1,
                "Error handling request from %s",
                ("10.0.0.9",),
                sys.exc_info(),
            )
        if quiet.filter(record):
            written.append(record)
    assert [r.getMessage() for r in written] == [
        "malformed HTTP request from 10.0.0.9, answered 400 and closed: Invalid header token:",
        "malformed HTTP request from 10.0.0.9, answered 400 and closed: Invalid header token: (59 more in the last 60s)",
        "malformed HTTP request from 10.0.0.9, answered 400 and closed: Invalid header token: (59 more in the last 60s)",
    ]
    assert all(r.levelname == "WARNING" and r.exc_info is None for r in written) and quiet.seen == 121
    other = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Unhandled exception", (), None)
    assert quiet.filter(other) and other.levelname == "ERROR"  # a server bug stays an error
