"""A real Prometheus (the Debian package's binary) for tests, plus fixture loading helpers."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS

from collector.receiver.decode import parse_json

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def require(binary: str) -> None:
    """Fail (never skip) when a binary the test needs is missing, saying how to get it."""
    if shutil.which(binary) is None:
        pytest.fail(
            f"`{binary}` is not installed: apt-get install prometheus (deploy/ci-packages.txt; .ci/run does it)"
        )


# Prometheus's log line once its web server is bound: msg="Listening on" address=127.0.0.1:PORT
_LISTENING = re.compile(r'msg="Listening on" address=\S+:(\d+)')


class Prometheus:
    def __init__(self, tmp: Path, jobs: dict[str, list[str]], rules: bool = True) -> None:
        self.port = 0  # Prometheus binds port 0 and logs the port it got
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets}]} for job, targets in jobs.items()
            ],
        }
        if rules:
            config["rule_files"] = [str(DEPLOY / "prometheus" / "rules.yml")]
        path = tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        self.log_path = tmp / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                prometheus_binary() or "prometheus",
                f"--config.file={path}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                "--web.listen-address=127.0.0.1:0",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self.port:
                found = _LISTENING.search(self.log_path.read_text())
                if found is None:
                    time.sleep(0.2)
                    continue
                self.port = int(found.group(1))
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(self.log_path.read_text())

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]

    def scrapes(self) -> int:
        """The scrapes so far of the target scraped least (``up``'s samples; 0 before any)."""
        result = self.query("min(count_over_time(up[1h]))")
        return int(float(result[0]["value"][1])) if result else 0

    def wait_scrapes(self, n: int = 3) -> None:
        """Until every target has been scraped ``n`` more times (one a second): what it
        exposed when this was called is then in the database, however busy the machine."""
        wanted = self.scrapes() + n
        deadline = time.monotonic() + n + 30
        while self.scrapes() < wanted:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} scrapes not made in {n + 30} s: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def fixture_requests() -> tuple[list[ExportTraceServiceRequest], list[ExportLogsServiceRequest]]:
    traces, logs = [], []
    for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")):
        traces += [
            parse_json(ExportTraceServiceRequest, line.encode())
            for line in path.read_text().splitlines()
            if line.strip()
        ]
    for path in sorted(FRAMEWORKS.glob("*/*.logs.jsonl")):
        logs += [
            parse_json(ExportLogsServiceRequest, line.encode())
            for line in path.read_text().splitlines()
            if line.strip()
        ]
    return traces, logs


def renamed(request: Any, suffix: str) -> Any:
    """A copy whose session ids end with ``suffix`` and whose trace ids are remapped: the same
    recorded sessions again, as new sessions."""
    copy = type(request)()
    copy.CopyFrom(request)

    def fix(kvs: Any) -> None:
        for kv in kvs:
            if kv.key in SESSION_KEYS and kv.value.HasField("string_value"):
                kv.value.string_value += suffix

    def tid(value: bytes) -> bytes:
        return hashlib.sha256(suffix.encode() + value).digest()[:16] if value else value

    groups = copy.resource_spans if isinstance(copy, ExportTraceServiceRequest) else copy.resource_logs
    for group in groups:
        fix(group.resource.attributes)
        for scoped in group.scope_spans if isinstance(copy, ExportTraceServiceRequest) else group.scope_logs:
            for item in scoped.spans if isinstance(copy, ExportTraceServiceRequest) else scoped.log_records:
                fix(item.attributes)
                item.trace_id = tid(item.trace_id)
                for link in getattr(item, "links", []):
                    link.trace_id = tid(link.trace_id)
    return copy


def send_grpc(
    port: int, traces: list[ExportTraceServiceRequest], logs: list[ExportLogsServiceRequest] = ()
) -> None:  # type: ignore[assignment]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export_traces = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        export_logs = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        for request in traces:
            export_traces(request, timeout=10)
        for log_request in logs:
            export_logs(log_request, timeout=10)
