"""Without auth, /v1/sessions* (what agents said) answers loopback clients only, unless
``status.sessions_open: true``; /metrics, /healthz and /readyz answer everyone; the startup
line says which applies.  A real client from this host's non-loopback address."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from support import Server, metric_value, outside_address


def get(host: str, port: int, path: str) -> tuple[int, dict[str, object] | str]:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as resp:
            body = resp.read().decode()
            return resp.status, json.loads(body) if path != "/metrics" else body
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def serve_everywhere(tmp: Path, **status: object) -> Server:
    return Server(tmp, {"status": {"endpoint": "0.0.0.0:0", **status}})


def test_without_auth_sessions_answer_loopback_clients_only(tmp_path: Path) -> None:
    outside = outside_address()
    srv = serve_everywhere(tmp_path)
    try:
        port = srv.status_port
        for path in ("/v1/sessions", "/v1/sessions/some-session"):
            status, body = get(outside, port, path)
            assert status == 403, path
            assert isinstance(body, dict) and "status.sessions_open: true" in str(body["message"])
            assert get("127.0.0.1", port, path)[0] in (200, 404)  # loopback: answered
        for path in ("/metrics", "/healthz", "/readyz"):
            assert get(outside, port, path)[0] == 200, path
        metrics = get(outside, port, "/metrics")[1]
        assert isinstance(metrics, str)
        assert (
            metric_value(
                metrics,
                "skillgauge_status_rejected_requests_total",
                endpoint="sessions",
                reason="not_loopback",
            )
            == 2
        )
        assert "/v1/sessions loopback clients only" in srv.log()
    finally:
        srv.stop()


def test_sessions_open_serves_every_client_and_says_so(tmp_path: Path) -> None:
    outside = outside_address()
    srv = serve_everywhere(tmp_path, sessions_open=True)
    try:
        status, body = get(outside, srv.status_port, "/v1/sessions")
        assert status == 200 and body == {"sessions": [], "next_cursor": None}
        assert "/v1/sessions open to every client (status.sessions_open: true)" in srv.log()
    finally:
        srv.stop()
