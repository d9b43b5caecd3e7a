"""The real OpenTelemetry Collector for tests: deploy/otelcol's distribution, the Collector
configs shipped under deploy/, a running Collector on free loopback ports, and what the
replicas behind it evaluated."""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from export.downstream import Downstream, attrs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS

from collector.receiver.decode import parse_json

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BUILD = DEPLOY / "otelcol" / "build"
BINARY_ENV = "SKILLGAUGE_OTELCOL"  # .ci/run exports the path deploy/otelcol/build printed
K8S = DEPLOY / "kubernetes" / "otel-collector-loadbalancer.yaml"
COMPOSE = DEPLOY / "compose" / "otel-collector.yaml"
COVERAGE = "skillgauge.coverage"


@functools.cache
def otelcol_binary() -> str:
    """The Collector binary: ``$SKILLGAUGE_OTELCOL``, else the last line deploy/otelcol/build
    prints (at once when its cache holds the binary; it builds it otherwise).  No Collector
    fails the test, never skips it."""
    path = os.environ.get(BINARY_ENV)
    if not path:
        run = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600)
        if run.returncode != 0 or not run.stdout.strip():
            pytest.fail(f"deploy/otelcol/build could not build the Collector:\n{run.stderr[-3000:]}")
        path = run.stdout.strip().splitlines()[-1]
    if not os.access(path, os.X_OK):
        pytest.fail(f"no Collector binary at {path!r} ({BINARY_ENV} or deploy/otelcol/build)")
    return path


def collector_configs() -> dict[str, dict[str, Any]]:
    """Every Collector config under deploy/ (a YAML document, or a ConfigMap's value, with
    ``service.pipelines``), by where it is: ``path`` or ``path#ConfigMap/name/key``."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        where = str(path.relative_to(ROOT))
        for doc in yaml.safe_load_all(path.read_text()):
            if _is_collector_config(doc):
                found[where] = doc
            elif isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
                for key, value in (doc.get("data") or {}).items():
                    parsed = yaml.safe_load(value) if key.endswith((".yaml", ".yml")) else None
                    if _is_collector_config(parsed):
                        found[f"{where}#ConfigMap/{doc['metadata']['name']}/{key}"] = parsed
    return found


def _is_collector_config(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("service"), dict) and "pipelines" in doc["service"]


def k8s_config() -> dict[str, Any]:
    (config,) = (c for where, c in collector_configs().items() if where.startswith(str(K8S.relative_to(ROOT))))
    return config


def compose_config() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def with_static_replicas(config: dict[str, Any], endpoints: list[str]) -> dict[str, Any]:
    """``config`` with every loadbalancing exporter's resolver a static list of ``endpoints``."""
    for name, exporter in config["exporters"].items():
        if name.split("/")[0] in ("load_balancing", "loadbalancing"):
            exporter["resolver"] = {"static": {"hostnames": list(endpoints)}}
    return config


def validate(config: dict[str, Any], tmp: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp / "validate.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [otelcol_binary(), "validate", f"--config={path}"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Otelcol:
    """The Collector running ``config`` in a subprocess, on loopback ports found free: the
    ``otlp`` receiver's gRPC (``grpc_port``; HTTP left out; other otlp receivers on other
    ports), health_check
    (``health_port``, waited on) and its own Prometheus metrics (``metrics_port``).  Its
    file_storage extensions keep their directories under ``tmp``.  A port taken between
    the look and the bind is tried again with others."""

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        self.tmp = tmp
        self.log_path = tmp / "otelcol.log"
        for _ in range(5):
            self.grpc_port, self.health_port, self.metrics_port = free_port(), free_port(), free_port()
            path = tmp / "otelcol.yaml"
            path.write_text(yaml.safe_dump(self._local(config)))
            self._log = self.log_path.open("wb")
            self.proc = subprocess.Popen(
                [otelcol_binary(), f"--config={path}"], stdout=self._log, stderr=subprocess.STDOUT
            )
            if self._wait_healthy():
                return
            self._log.close()
            if "address already in use" not in self.log():
                raise RuntimeError(f"the Collector did not start:\n{self.log()[-4000:]}")
        raise RuntimeError(f"no free ports for the Collector:\n{self.log()[-4000:]}")

    def _local(self, config: dict[str, Any]) -> dict[str, Any]:
        config = yaml.safe_load(yaml.safe_dump(config))  # a deep copy
        for name, receiver in config["receivers"].items():  # every otlp receiver: gRPC on a free port
            port = self.grpc_port if name == "otlp" else free_port()
            receiver["protocols"] = {"grpc": {"endpoint": f"127.0.0.1:{port}"}}
        extensions = config.setdefault("extensions", {})
        extensions["health_check"] = {"endpoint": f"127.0.0.1:{self.health_port}"}
        for name, extension in extensions.items():
            if name.split("/")[0] == "file_storage":
                extension["directory"] = str(self.tmp / name.replace("/", "-"))
                extension["create_directory"] = True
        service = config["service"]
        service["extensions"] = sorted(set(service.get("extensions", [])) | {"health_check"})
        reader = {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": self.metrics_port}}}}
        service["telemetry"] = {"metrics": {"level": "detailed", "readers": [reader]}}
        return config

    def _wait_healthy(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/", timeout=1) as resp:
                    if resp.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the Collector is not healthy after {timeout}s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def retry_intervals(self, component: str | None = None) -> list[float]:
        """The waits, in seconds, of every "Will retry the request after interval" it logged
        (of the exporter ``component`` only, when given)."""
        out = []
        for line in self.log().splitlines():
            if "Will retry the request after interval" not in line:
                continue
            if component is not None and f'"otelcol.component.id": "{component}"' not in line:
                continue
            found = re.search(r'"interval": "([0-9.]+)(ms|s)"', line)
            if found:
                out.append(float(found.group(1)) / (1000 if found.group(2) == "ms" else 1))
        return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def recorded(frameworks: tuple[str, ...]) -> tuple[list[ExportTraceServiceRequest], list[ExportLogsServiceRequest], list[set[str]]]:
    """The recorded requests of ``frameworks`` (traces, logs) and the session ids their ground
    truth names, grouped by recording (``opencode serve`` runs two sessions in one trace)."""
    traces: list[ExportTraceServiceRequest] = []
    logs: list[ExportLogsServiceRequest] = []
    groups: dict[tuple[str, ...], set[str]] = {}
    for framework in frameworks:
        for path in sorted((FRAMEWORKS / framework).glob("*.traces.jsonl")):
            traces += [parse_json(ExportTraceServiceRequest, line.encode()) for line in _lines(path)]
        for path in sorted((FRAMEWORKS / framework).glob("*.logs.jsonl")):
            logs += [parse_json(ExportLogsServiceRequest, line.encode()) for line in _lines(path)]
        expected = json.loads((FRAMEWORKS / framework / "expected.json").read_text())
        for scenario in expected["scenarios"].values():
            groups.setdefault((framework, *scenario["files"]), set()).add(scenario["session_id"])
    return traces, logs, list(groups.values())


def _lines(path: Path) -> Iterator[str]:
    return (line for line in path.read_text().splitlines() if line.strip())


def coverage(downstream: Downstream) -> dict[tuple[str, int], dict[str, Any]]:
    """The coverage summary of each (session, revision) a replica exported, by its attributes
    (an outbox resending after a restart sends the same span again: one entry)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for _, span in downstream.spans():
        if span.name == COVERAGE:
            a = attrs(span.attributes)
            out[(a["session.id"], a["skillgauge.session.revision"])] = a
    return out


def evaluated_on(downstreams: list[Downstream]) -> dict[str, list[int]]:
    """For each session id, the replicas (indexes) that exported a coverage summary for it."""
    where: dict[str, list[int]] = {}
    for n, downstream in enumerate(downstreams):
        for session, _ in coverage(downstream):
            if n not in where.setdefault(session, []):
                where[session].append(n)
    return where
