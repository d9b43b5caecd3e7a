"""Page login as web apps do it, against a real ``skillgauge serve``: the cookie holds a
session id, never the token; a login or logout posted from a foreign origin is refused;
failed logins are counted, logged once a minute and answered 429 after a burst, per client;
logout ends the session.  Over HTTP here; in a real headless Chromium below, where the
browser's own Origin and cookie handling matter."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from browser import chromium
from selenium.webdriver.common.by import By
from support import Server, metric_value, outside_address, wait_for

from collector.status.login import BURST, COOKIE

TOKEN = "login-token-7c1d9e3f5a2b4680"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "status-token").write_text(TOKEN + "\n")
    status = {"endpoint": "0.0.0.0:0", "auth": {"bearer_token_file": str(tmp_path / "status-token")}}
    srv = Server(tmp_path, {"status": status}, status_token=TOKEN)
    yield srv
    srv.stop()


def _post(
    srv: Server,
    path: str,
    form: dict[str, str],
    origin: str | None = "same",
    cookie: str | None = None,
    host: str = "127.0.0.1",
) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection(host, srv.status_port, timeout=10)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if origin is not None:
        headers["Origin"] = f"http://{host}:{srv.status_port}" if origin == "same" else origin
    if cookie is not None:
        headers["Cookie"] = f"{COOKIE}={cookie}"
    connection.request("POST", path, urlencode(form), headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def _get(srv: Server, path: str, cookie: str | None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", srv.status_port, timeout=10)
    connection.request("GET", path, headers={"Cookie": f"{COOKIE}={cookie}"} if cookie else {})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def _session_cookie(response: http.client.HTTPResponse) -> str:
    (header,) = [v for k, v in response.getheaders() if k.lower() == "set-cookie" and v.startswith(COOKIE)]
    attributes = [part.strip().lower() for part in header.split(";")]
    assert "httponly" in attributes and "samesite=strict" in attributes and "path=/ui/" in attributes
    return header.split(";")[0].partition("=")[2]


def test_the_cookie_holds_a_session_id_not_the_token_and_logout_ends_the_session(served: Server) -> None:
    response = _post(served, "/ui/login", {"token": TOKEN})
    assert response.status == 303
    session = _session_cookie(response)
    assert TOKEN not in session and len(session) >= 40
    assert _get(served, "/ui/sessions", session) == 200
    other = _session_cookie(_post(served, "/ui/login", {"token": TOKEN}))
    assert other != session  # each login a session of its own
    logout = _post(served, "/ui/logout", {}, cookie=session)
    assert logout.status == 303 and logout.getheader("Location") == "/ui/login"
    assert _get(served, "/ui/sessions", session) == 401  # ended on the server, not only in the browser
    assert _get(served, "/ui/sessions", other) == 200
    assert _get(served, "/ui/sessions", TOKEN) == 401  # the token itself is no cookie


@pytest.mark.parametrize("origin", ["http://evil.example", "null", None])
def test_a_login_not_posted_from_a_page_of_this_listener_is_refused(served: Server, origin: str | None) -> None:
    response = _post(served, "/ui/login", {"token": TOKEN}, origin=origin)
    assert response.status == 403
    assert not [v for k, v in response.getheaders() if k.lower() == "set-cookie"]
    text = served.metrics()
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="ui", reason="foreign_origin") == 1


def test_a_logout_from_a_foreign_page_does_not_end_the_session(served: Server) -> None:
    session = _session_cookie(_post(served, "/ui/login", {"token": TOKEN}))
    assert _post(served, "/ui/logout", {}, origin="http://evil.example", cookie=session).status == 403
    assert _get(served, "/ui/sessions", session) == 200


def test_failed_logins_are_counted_logged_once_and_answered_429_after_a_burst_per_client(served: Server) -> None:
    for _ in range(BURST):
        assert _post(served, "/ui/login", {"token": "guess"}).status == 401
    throttled = _post(served, "/ui/login", {"token": TOKEN})  # even the right token: not looked at
    assert throttled.status == 429 and int(throttled.getheader("Retry-After") or 0) >= 1
    assert not [v for k, v in throttled.getheaders() if k.lower() == "set-cookie"]
    # Another client is not held back by this one's failures.
    outside = outside_address()
    assert _post(served, "/ui/login", {"token": TOKEN}, host=outside).status == 303
    text = served.metrics()
    ui = {"endpoint": "ui"}
    assert metric_value(text, "skillgauge_status_rejected_requests_total", reason="login_failed", **ui) == BURST
    assert metric_value(text, "skillgauge_status_rejected_requests_total", reason="login_throttled", **ui) == 1
    lines = [x for x in served.log().splitlines() if "page login" in x]
    assert len(lines) == 1 and "WARNING" in lines[0] and "127.0.0.1" in lines[0]
    assert "guess" not in served.log() and TOKEN not in served.log()


class _Foreign(http.server.BaseHTTPRequestHandler):
    """Another origin's page: a form that posts the right token to the status API's login."""

    target = ""

    def do_GET(self) -> None:
        body = (
            f'<form id="f" method="post" action="{self.target}/ui/login">'
            f'<input name="token" value="{TOKEN}"></form><script>document.getElementById("f").submit()</script>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_in_a_browser_login_sets_a_session_cookie_sign_out_ends_it_and_a_foreign_page_cannot_log_in(
    served: Server,
) -> None:
    base = f"http://127.0.0.1:{served.status_port}"
    _Foreign.target = base
    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        with chromium() as driver:
            driver.get(f"http://localhost:{foreign.server_address[1]}/")  # another origin
            wait_for(lambda: urlsplit(driver.current_url).path == "/ui/login", timeout=10)
            assert "must be posted from a page of this status API" in driver.page_source
            driver.get(f"{base}/ui/sessions")
            assert driver.find_element(By.TAG_NAME, "h1").text == "Sign in"  # no session was made
            driver.find_element(By.NAME, "token").send_keys(TOKEN)
            driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
            wait_for(lambda: urlsplit(driver.current_url).path == "/ui/", timeout=10)
            (cookie,) = [c for c in driver.get_cookies() if c["name"] == COOKIE]
            assert cookie["httpOnly"] and cookie["value"] != TOKEN and TOKEN not in cookie["value"]
            driver.get(f"{base}/ui/sessions")
            assert driver.find_element(By.TAG_NAME, "h1").text != "Sign in"
            driver.find_element(By.ID, "logout").click()
            wait_for(lambda: urlsplit(driver.current_url).path == "/ui/login", timeout=10)
            assert _get(served, "/ui/sessions", str(cookie["value"])) == 401
            driver.get(f"{base}/ui/sessions")
            assert driver.find_element(By.TAG_NAME, "h1").text == "Sign in"
    finally:
        foreign.shutdown()
        foreign.server_close()
    text = served.metrics()
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="ui", reason="foreign_origin") == 1
