"""The shared PostgreSQL store goes away under a real ``skillgauge serve`` (an immediate
shutdown, as a crash or a failover is to its clients) and comes back: requests are still
acknowledged (the request log is local), the status API answers 503 naming the store (not a
500 and a traceback) while it is away, and every session is evaluated once it is back."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from perf.bench import recorded_session
from postgres import Postgres
from support import Server, export_grpc, wait_for
from test_store_refusal import _evaluated

BEFORE, DURING = 2, 3  # sessions evaluated before the store went away, and sent while it was away


def _answer(server: Server, path: str) -> tuple[int, str, str]:
    """Status, Retry-After and body of a GET to the status API."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.status_port}{path}", timeout=10) as resp:
            return resp.status, resp.headers.get("Retry-After", ""), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Retry-After", ""), err.read().decode()


def test_the_shared_store_away_delays_results_answers_503_and_loses_nothing(
    tmp_path: Path, postgres_server: Postgres
) -> None:
    url = postgres_server.url()
    names = [f"outage-{n}" for n in range(BEFORE + DURING)]
    server = Server(
        tmp_path, {"storage": {"shared": url}, "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"}}
    )
    try:
        for n, name in enumerate(names[:BEFORE]):
            export_grpc(server, recorded_session(n, name).SerializeToString())
            wait_for(lambda name=name: _evaluated(server, name), timeout=60)
        postgres_server.halt()
        try:
            for n, name in enumerate(names[BEFORE:], BEFORE):
                export_grpc(server, recorded_session(n, name).SerializeToString())  # acknowledged
            detail = _answer(server, f"/v1/sessions/{names[0]}")
            listing = _answer(server, "/v1/sessions")
            page = _answer(server, "/ui/sessions")
        finally:
            postgres_server.resume()
        for name in names:
            wait_for(lambda name=name: _evaluated(server, name), timeout=90)
        log = server.log()
    finally:
        assert server.stop() == 0
    for status, retry_after, _ in (detail, listing, page):
        assert (status, retry_after) == (503, "5")
    answer = json.loads(detail[2])
    assert answer["code"] == 14 and "the shared store postgresql://" in answer["message"]
    assert "cannot be read now" in page[2]
    assert "Traceback" not in log
