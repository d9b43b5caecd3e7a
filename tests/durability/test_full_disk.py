"""A real full disk under ``skillgauge serve``: its data directory on a 10 MB tmpfs.

Fill it until the answers turn retryable (gRPC UNAVAILABLE + RetryInfo, HTTP 503 +
Retry-After) and /readyz says 503; free space (a filler file put on the tmpfs first); the
service is ready again by itself and acknowledges new requests; kill -9; restart; every
acknowledged session is evaluated and nothing in the spool had to be quarantined.

Mounting needs root (CI runs as root); without it the test fails, saying so.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from shared_tables import SharedTables
from support import Server, export_grpc, metric_value, wait_for

DISK = "10m"
FILLER = 3 * 1024 * 1024  # freed to let the service recover
PAD = 200_000  # bytes of attribute per request: the disk fills in ~35 requests


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(
            f"this test mounts a {DISK} tmpfs and needs root (euid {os.geteuid()}): {done.stderr.strip()}"
        )
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _request(session: str, n: int) -> bytes:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=(n + 1).to_bytes(16, "big"),
            span_id=(n + 1).to_bytes(8, "big"),
            name="chat",
            start_time_unix_nano=1_700_000_000_000_000_000,
            end_time_unix_nano=1_700_000_001_000_000_000,
        )
    )
    span.attributes.add(key="session.id").value.string_value = session
    span.attributes.add(key="pad").value.string_value = "x" * PAD
    return request.SerializeToString()


def _plug(disk: Path) -> None:
    """Fill what is left free on ``disk`` (``plug``, grown until the disk refuses a page): the
    service may free some room of its own after a refusal (its request log checkpointed), and
    the checks below need a disk that is full when they send."""
    with open(disk / "plug", "ab", buffering=0) as plug:
        for chunk in (64 * 1024, 4096):
            try:
                while True:
                    plug.write(b"\0" * chunk)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise


def _export(server: Server, body: bytes) -> grpc.RpcError | None:
    try:
        export_grpc(server, body)
        return None
    except grpc.RpcError as err:
        return err


def _post(server: Server, body: bytes) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(
        f"{server.http_url}/v1/traces", data=body, headers={"Content-Type": "application/x-protobuf"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


def test_a_full_disk_answers_retryable_recovers_by_itself_and_loses_nothing_acknowledged(
    tmp_path: Path, small_disk: Path, shared: SharedTables
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * FILLER)
    # Sessions stay open while the disk fills (nothing is trimmed meanwhile); after the
    # restart they close within a second and are evaluated.
    storage = shared.config({"storage": {"path": str(small_disk / "data")}})
    filling = {**storage, "sessions": {"idle_timeout": "1h", "check_interval": "0.1s"}}
    server = Server(tmp_path, filling)
    acked: list[str] = []
    try:
        refused: grpc.RpcError | None = None
        for n in range(200):
            session = f"disk-{n:03d}"
            refused = _export(server, _request(session, n))
            if refused is not None:
                break
            acked.append(session)
        assert refused is not None, "the disk never filled up"
        assert len(acked) >= 5, acked

        # Retryable, with a delay the exporters honour; counted; not ready.
        assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused
        trailers = dict(refused.trailing_metadata() or ())
        info = error_details_pb2.RetryInfo()
        info.ParseFromString(trailers["google.rpc.retryinfo-bin"])
        assert info.retry_delay.seconds >= 1
        _plug(small_disk)
        code, headers = _post(server, _request("disk-http", 999))
        assert code == 503 and int(headers["Retry-After"]) >= 1
        assert server.get_json("/readyz") == (503, {"status": "storage_unavailable"})
        metrics = server.metrics()
        assert (
            metric_value(
                metrics, "skillgauge_rejected_requests_total", protocol="grpc", reason="storage_error"
            )
            >= 1
        )
        assert (
            metric_value(
                metrics, "skillgauge_rejected_requests_total", protocol="http", reason="storage_error"
            )
            == 1
        )
        assert metric_value(metrics, "skillgauge_storage_write_failures_total", write="request") >= 2
        # Still refused while the disk is full: a probe does not make it ready.
        _plug(small_disk)
        assert _export(server, _request("disk-still-full", 998)) is not None
        assert server.get_json("/readyz")[0] == 503

        # Space again: ready by itself (no request needed), and requests are acknowledged.
        filler.unlink()
        (small_disk / "plug").unlink()
        wait_for(lambda: server.get_json("/readyz")[0] == 200, timeout=30)
        for n in range(200, 203):
            session = f"disk-{n:03d}"
            assert _export(server, _request(session, n)) is None
            acked.append(session)
        assert "storage works again" in server.log()
        first_log = server.log()

        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        server.stop()
        server = Server(tmp_path, {**storage, "sessions": {"idle_timeout": "1s", "check_interval": "0.1s"}})
        db = shared.at(small_disk / "data")
        try:
            wait_for(lambda: len(db.rows("SELECT 1 FROM coverage")) >= len(acked), timeout=60, interval=0.3)
        except TimeoutError:
            recorded = {row[0] for row in db.rows("SELECT session FROM coverage")}
            missing = sorted(set(acked) - recorded)
            pytest.fail(f"no coverage row in 60 s for {missing}; the restarted server's log:\n{server.log()}")
        coverage = {s: json.loads(r)["spans"] for s, r in db.rows("SELECT session, record FROM coverage")}
        quarantined = metric_value(server.metrics(), "skillgauge_spool_quarantined_total")
    finally:
        code = server.stop()
    assert code == 0
    assert coverage == {session: 1 for session in acked}  # every acknowledged span, nothing refused
    assert quarantined == 0 and "quarantined" not in server.log()
    assert first_log.count("spool: a write failed") == 1  # once a burst
