"""Open sessions are listed before they close (``GET /v1/sessions?state=open`` and the
/ui/sessions page), with how long until they close and what closes them; once closed they
leave that list for the evaluated one.  Against a running ``skillgauge serve``."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from support import Server, wait_for

T1 = "0af7651916cd43dd8448eb211c80319c"


def _span(span_id: str, **attributes: Any) -> dict[str, Any]:
    values = {"session.id": {"stringValue": "open-1"}} | {
        k: {"boolValue": v} if isinstance(v, bool) else {"stringValue": v} for k, v in attributes.items()
    }
    return {
        "traceId": T1,
        "spanId": span_id,
        "name": "invoke_agent",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [{"key": k, "value": v} for k, v in values.items()],
    }


def _post(srv: Server, *spans: dict[str, Any]) -> None:
    body = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]})
    req = urllib.request.Request(f"{srv.http_url}/v1/traces", body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def _page(srv: Server, path: str) -> str:
    with urllib.request.urlopen(f"{srv.status_url}{path}", timeout=5) as resp:
        return str(resp.read().decode())


def test_an_open_session_is_listed_until_it_closes(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"sessions": {"idle_timeout": "300s", "max_duration": "6h"}})
    try:
        _post(srv, _span("00f067aa0ba902b7", **{"gen_ai.operation.name": "invoke_agent"}))
        code, body = srv.get_json("/v1/sessions?state=open")
        assert code == 200, body
        (row,) = body["sessions"]
        assert row["session_id"] == "open-1" and row["spans"] == 1 and row["revision"] == 1
        assert row["closes_by"] == "idle_timeout"
        assert 0 < row["closes_in_seconds"] <= 300
        assert "skillgauge.session.end=true" in row["also_closed_by"]
        assert row["detail"] == "/v1/sessions/open-1"
        assert row["replica"].endswith(f":{(tmp_path / 'data').resolve()}")  # which replica holds it
        assert srv.get_json("/v1/sessions")[1]["sessions"] == []  # nothing evaluated yet
        detail = srv.get_json(row["detail"])[1]["open"]
        assert detail["closes_by"] == "idle_timeout" and 0 < detail["closes_in_seconds"] <= 300
        assert detail["replica"] == row["replica"]
        page = _page(srv, "/ui/sessions")
        assert 'class="open-link mono" href="/ui/sessions/open-1"' in page
        assert "Open sessions (1)" in page and "idle_timeout" in page

        # Filters of evaluated sessions do not apply to open ones: said, not ignored.
        code, refused = srv.get_json("/v1/sessions?state=open&evaluation=skill_invoked")
        assert code == 400 and "state=open takes only" in refused["message"]

        _post(srv, _span("00f067aa0ba902b8", **{"skillgauge.session.end": True}))
        wait_for(lambda: srv.get_json("/v1/sessions")[1]["sessions"], timeout=30)
        assert srv.get_json("/v1/sessions?state=open")[1]["sessions"] == []
        (closed,) = srv.get_json("/v1/sessions")[1]["sessions"]
        assert (closed["session_id"], closed["close_reason"]) == ("open-1", "end_attribute")
        assert "No session is open." in _page(srv, "/ui/sessions?state=open")
    finally:
        srv.stop()
