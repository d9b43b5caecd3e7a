"""The OTLP/HTTP connection cap (``receivers.otlp.http.max_connections``), against a running
``skillgauge serve`` with raw sockets."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from support import Server, metric_value, wait_for

from collector.config import ConfigError, parse
from collector.receiver.connections import RESERVED_FILES, fit_to_open_files

CAP = 4
EMPTY = json.dumps({"resourceSpans": []}).encode()


def _connect(srv: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.http_port), timeout=15)
    return sock


def _read_to_end(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _open(srv: Server) -> float:
    return metric_value(srv.metrics(), "skillgauge_http_connections")


def _post_empty(srv: Server) -> int:
    req = urllib.request.Request(f"{srv.http_url}/v1/traces", EMPTY, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def test_a_connection_beyond_the_cap_is_answered_503_and_closed_unread(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_connections": CAP}}}})
    idle: list[socket.socket] = []
    try:
        idle = [_connect(srv) for _ in range(CAP)]
        wait_for(lambda: _open(srv) == CAP)
        extra = _connect(srv)  # sends nothing: the answer comes before any request is read
        answer = _read_to_end(extra)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert b"\r\nRetry-After: 1\r\n" in answer and b"\r\nConnection: close\r\n" in answer
        text = srv.metrics()
        assert metric_value(text, "skillgauge_http_connections_refused_total") == 1
        assert metric_value(text, "skillgauge_http_connections") == CAP
        line = wait_for(
            lambda: next((x for x in srv.log().splitlines() if "refused a connection" in x), None)
        )
        assert "WARNING" in line and "receivers.otlp.http.max_connections" in line

        idle.pop().close()  # one client goes: its place is free for the next
        wait_for(lambda: _open(srv) == CAP - 1)
        assert _post_empty(srv) == 200
        assert metric_value(srv.metrics(), "skillgauge_http_connections_refused_total") == 1
    finally:
        for sock in idle:
            sock.close()
        srv.stop()


def test_a_burst_never_holds_more_than_the_cap_and_leaves_no_count_behind(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_connections": CAP}}}})
    burst: list[socket.socket] = []
    try:
        burst = [_connect(srv) for _ in range(5 * CAP)]
        text = wait_for(
            lambda: (
                (t := srv.metrics())
                and metric_value(t, "skillgauge_http_connections_refused_total") == 4 * CAP
                and t
            )
        )
        assert metric_value(text, "skillgauge_http_connections") == CAP
        answers = [answer for sock in burst if (answer := _read_if_closed(sock)) is not None]
        assert len(answers) == 4 * CAP  # the others stay open, idle
        assert all(answer.startswith(b"HTTP/1.1 503 ") for answer in answers)
        warnings = [x for x in srv.log().splitlines() if "refused a connection" in x]
        assert len(warnings) == 1  # rate-limited: one line for the burst
        for sock in burst:
            sock.close()
        wait_for(lambda: _open(srv) == 0)
        assert _post_empty(srv) == 200
    finally:
        for sock in burst:
            sock.close()
        srv.stop()


def _read_if_closed(sock: socket.socket) -> bytes | None:
    """What the server sent before it closed ``sock``; None while it is still open."""
    sock.settimeout(0.5)
    try:
        return _read_to_end(sock)
    except TimeoutError:
        return None
    finally:
        sock.settimeout(15)


def test_an_idle_connection_closed_by_read_timeout_frees_its_place(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_connections": 1, "read_timeout": "1s"}}}})
    try:
        idle = _connect(srv)
        assert _read_to_end(idle) == b""  # the server closed it: no request within read_timeout
        idle.close()
        wait_for(lambda: _open(srv) == 0)
        assert _post_empty(srv) == 200
        assert metric_value(srv.metrics(), "skillgauge_http_connections_refused_total") == 0
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0 is out of range - it must be more than 0"),
        (-1, "-1 is out of range - it must be more than 0"),
        ("many", "expected a number, got 'many'"),
        (2.5, "expected a whole number"),
    ],
)
def test_max_connections_must_be_a_positive_whole_number(value: object, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"receivers": {"otlp": {"http": {"endpoint": "0.0.0.0:4318", "max_connections": value}}}})
    assert f"receivers.otlp.http.max_connections: {expected}" in str(err.value)


def test_a_cap_above_the_open_file_limit_is_lowered_with_a_warning() -> None:
    field = "receivers.otlp.http.max_connections"
    assert fit_to_open_files({field: 100}, 100 + RESERVED_FILES) == ({field: 100}, [])
    fitted, (warning,) = fit_to_open_files({field: 1024}, 512)
    assert fitted == {field: 512 - RESERVED_FILES}
    assert "may open only 512 files" in warning and f"lowered to {512 - RESERVED_FILES}" in warning
    assert "lower receivers.otlp.http.max_connections" in warning


def test_serve_warns_at_startup_when_the_open_file_limit_is_below_the_cap(tmp_path: Path) -> None:
    srv = Server(tmp_path, open_files=512)  # max_connections: the default 1024
    try:
        line = next(x for x in srv.log().splitlines() if "(ulimit -n)" in x and "otlp.http" in x)
        assert (
            "WARNING" in line
            and "receivers.otlp.http.max_connections is 1024 but this process may open only 512 files" in line
        )
    finally:
        srv.stop()
