"""deploy/ YAML and the Dockerfile, checked by parsing (no Docker or cluster here)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from collector.config import parse

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _kind(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return doc


def test_dockerfile_is_slim_non_root_with_a_healthcheck() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    user = [line for line in text.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].split()[1].startswith(("root", "0"))
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert "EXPOSE 4317 4318 9464" in text


def test_config_files_shipped_in_deploy_are_valid_skillgauge_configs(monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    k8s = _docs(DEPLOY / "kubernetes" / "skillgauge.yaml")
    sources = {
        "docker": yaml.safe_load((DEPLOY / "docker" / "skillgauge.yaml").read_text()),
        "compose": yaml.safe_load((DEPLOY / "compose" / "skillgauge.yaml").read_text()),
        "kubernetes": yaml.safe_load(_kind(k8s, "ConfigMap")["data"]["skillgauge.yaml"]),
    }
    for name, data in sources.items():
        config = parse(data, name)
        # Only compose has a collector to export to; elsewhere nothing is exported until told.
        assert (config.export.otlp is not None) == (name == "compose"), name
        assert config.status.endpoint.endswith(":9464")


def test_compose_wires_collector_skillgauge_prometheus_grafana() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"skillgauge", "otel-collector", "prometheus", "grafana", "postgres"}
    assert services["postgres"]["profiles"] == ["shared"]  # the shared store: only when asked for
    # The Collector is deploy/otelcol's distribution, the one tests/deploy/test_otelcol.py runs.
    assert services["otel-collector"]["build"] == "../otelcol"
    assert (DEPLOY / "otelcol" / "Dockerfile").exists()
    base = DEPLOY / "compose"
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (base / source).resolve().exists(), source
    collector = yaml.safe_load((base / "otel-collector.yaml").read_text())
    assert collector["exporters"]["otlp_grpc/skillgauge"]["endpoint"] == "skillgauge:4317"
    assert "otlp_grpc/skillgauge" in collector["service"]["pipelines"]["traces/agents"]["exporters"]
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == ["skillgauge:9464"]


def test_kubernetes_loadbalancer_routes_on_session_id_to_the_headless_service() -> None:
    lb = _docs(DEPLOY / "kubernetes" / "otel-collector-loadbalancer.yaml")
    config = yaml.safe_load(_kind(lb, "ConfigMap")["data"]["config.yaml"])
    exporter = config["exporters"]["load_balancing"]
    assert exporter["routing_key"] == "attributes"
    assert exporter["routing_attributes"] == ["session.id"]
    assert exporter["resolver"]["k8s"]["service"] == "skillgauge-headless.skillgauge"
    # OpenCode and Kilo Code CLI go by process (service.instance.id) through a second exporter
    # on the same replicas (tests/deploy/test_otelcol.py runs this config).
    by_instance = config["exporters"]["load_balancing/by_instance"]
    assert by_instance["routing_attributes"] == ["service.instance.id"]
    assert by_instance["resolver"] == exporter["resolver"]
    assert config["service"]["pipelines"]["traces/opencode"]["exporters"] == ["load_balancing/by_instance"]
    role = _kind(lb, "Role")
    assert any("endpoints" in r["resources"] and "watch" in r["verbs"] for r in role["rules"])

    sg = _docs(DEPLOY / "kubernetes" / "skillgauge.yaml")
    headless = _kind(sg, "Service", "skillgauge-headless")
    assert headless["spec"]["clusterIP"] == "None"
    sts = _kind(sg, "StatefulSet")
    assert sts["spec"]["serviceName"] == "skillgauge-headless"
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert {m["name"] for m in container["volumeMounts"]} == {"config", "spool"}
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "spool"
    # The judge's Secret is the operator's: never in the kustomization, created as documented.
    secret = container["envFrom"][0]["secretRef"]["name"]
    assert not [d for d in sg if d["kind"] == "Secret"]
    assert f"create secret generic {secret}" in (DEPLOY / "kubernetes" / "README.md").read_text()
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert (DEPLOY / "kubernetes" / "README.md").exists()


ROOT = DEPLOY.parent


def test_readme_compose_and_kubernetes_name_one_image_tag_the_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    image = re.compile(r"(?:image:\s*|docker build .*-t\s+)skillgauge(:[^\s`]+)?")
    where = {
        "README.md": ROOT / "README.md",
        "Dockerfile": DEPLOY / "docker" / "Dockerfile",
        "compose": DEPLOY / "compose" / "compose.yaml",
        "kubernetes": DEPLOY / "kubernetes" / "skillgauge.yaml",
        "kubernetes README": DEPLOY / "kubernetes" / "README.md",
    }
    for name, path in where.items():
        tags = [m.group(1) or ":latest" for m in image.finditer(path.read_text())]
        assert tags and set(tags) == {f":{version}"}, (name, tags)


def _ignored(rules: list[str], path: str) -> bool:
    # Docker's rule: the last pattern that matches a path (or a folder above it) decides.
    ignored = False
    parts = path.split("/")
    for rule in rules:
        negate, pattern = rule.startswith("!"), rule.lstrip("!").rstrip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        bare = pattern.removeprefix("**/")
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(part, bare) for part in parts)
        ):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_what_the_dockerfile_copies_and_nothing_else() -> None:
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [
        source
        for line in (DEPLOY / "docker" / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for source in line.split()[1:-1]  # the last word is the destination
    ]
    assert set(sources) == {
        "pyproject.toml",
        "README.md",
        "collector",
        "evaluators",
        "deploy/docker/skillgauge.yaml",
    }
    for source in sources:
        assert not _ignored(rules, source), source
        assert not _ignored(rules, f"{source}/__init__.py") or not (ROOT / source).is_dir(), source
    for left_out in (
        ".git/HEAD",
        ".venv/bin/python",
        "venv/lib/x.py",
        "skillgauge-data/skillgauge.sqlite",
        "spool/requests/1.seg",
        "tests/fixtures/frameworks/adk/README.md",
        ".mypy_cache/x",
        "collector/__pycache__/cli.cpython-311.pyc",
        "deploy/kubernetes/skillgauge.yaml",
    ):
        assert _ignored(rules, left_out), left_out
