"""Span-derived text in the log cannot forge log lines or smuggle terminal escapes."""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
from pathlib import Path

from support import Server, wait_for

from collector.logsafety import EscapeControls

EVIL = "evil\n2026-01-01 00:00:00,000 INFO skillgauge: forged line\x1b[31m red \u202egnp.exe"


def test_escape_filter_turns_controls_into_visible_escapes() -> None:
    record = logging.LogRecord("skillgauge", logging.INFO, __file__, 1, "session %s closed", (EVIL,), None)
    assert EscapeControls().filter(record)
    message = record.getMessage()
    assert "\n" not in message and "\x1b" not in message and "\u202e" not in message
    assert message == (
        "session evil\\n2026-01-01 00:00:00,000 INFO skillgauge: forged line\\x1b[31m red \\u202egnp.exe closed"
    )
    plain = logging.LogRecord("skillgauge", logging.INFO, __file__, 1, "%d spans in %s", (3, "s1"), None)
    assert EscapeControls().filter(plain) and plain.getMessage() == "3 spans in s1"


def test_a_session_id_with_newlines_and_ansi_escapes_is_logged_escaped(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"log_level": "debug"})
    try:
        span = {
            "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000100000000",
            "attributes": [
                {"key": "session.id", "value": {"stringValue": EVIL}},
                {"key": "skillgauge.session.end", "value": {"boolValue": True}},
            ],
        }  # fmt: skip
        body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
        post = urllib.request.Request(f"{srv.http_url}/v1/traces", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(post, timeout=5) as resp:
            assert resp.status == 200
        path = f"/v1/sessions/{urllib.parse.quote(EVIL, safe='')}"
        wait_for(lambda: "revisions" in srv.get_json(path)[1], timeout=15)
        wait_for(lambda: "'evil\\n2026" in srv.log(), timeout=5)  # logged with %r: quoted, escaped
    finally:
        srv.stop()
    log = srv.log()
    assert "\x1b" not in log and "\u202e" not in log
    assert not any(
        line.startswith("2026-01-01 00:00:00,000 INFO skillgauge: forged") for line in log.splitlines()
    )
