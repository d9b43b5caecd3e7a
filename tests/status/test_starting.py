"""While ``serve`` starts (a restart replaying its spool can take minutes after a crash under
load), its status API answers already: /healthz 200, so that a liveness probe does not kill
the process mid-replay into the same replay again, and /readyz 503 "starting", so that no
traffic is routed to it; the OTLP receivers listen only once the replay is done."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from collector.config import parse
from collector.service import Chain, Service


def _get(port: int, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _text(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return str(resp.read().decode())


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_the_status_api_answers_while_the_chain_starts_and_the_receivers_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    config = parse(
        {
            "storage": {"path": str(tmp_path / "data")},
            "receivers": {
                "otlp": {"grpc": {"endpoint": "127.0.0.1:0"}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "status": {"endpoint": "127.0.0.1:0"},
        }
    )
    replaying, replayed = asyncio.Event(), asyncio.Event()
    start = Chain.start

    async def held_start(chain: Chain) -> None:  # the replay, held until the checks below are done
        replaying.set()
        await replayed.wait()
        await start(chain)

    monkeypatch.setattr(Chain, "start", held_start)
    service = Service(config)
    starting = asyncio.create_task(service.start())
    try:
        await asyncio.wait_for(replaying.wait(), timeout=30)
        port = service.ports["status"]
        health = await asyncio.to_thread(_get, port, "/healthz")
        ready = await asyncio.to_thread(_get, port, "/readyz")
        metrics = await asyncio.to_thread(_text, port, "/metrics")
        receiving = sorted(service.ports)  # each receiver's port, once it is bound
        replayed.set()
        await asyncio.wait_for(starting, timeout=30)
        ready_after = await asyncio.to_thread(_get, port, "/readyz")
        receiving_after = sorted(service.ports)
        otlp = await asyncio.to_thread(_listens, service.ports["grpc"])
    finally:
        replayed.set()
        await service.stop()
    assert health == (200, {"status": "ok"})
    assert ready == (503, {"status": "starting"})
    assert "skillgauge_sessions_open 0.0" in metrics  # the numbers as they stand, already
    assert receiving == ["status"]
    assert ready_after[0] == 200 and receiving_after == ["grpc", "http", "status"] and otlp
    assert f"status 127.0.0.1:{port} up: /healthz answers" in caplog.text

