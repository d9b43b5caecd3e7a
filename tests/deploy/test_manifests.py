"""deploy/ YAML and the Dockerfile, checked by parsing (no Docker or cluster here)."""

from __future__ import annotations

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
        assert config.export.otlp is not None, name
        assert config.status.endpoint.endswith(":9464")


def test_compose_wires_collector_skillgauge_prometheus_grafana() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"skillgauge", "otel-collector", "prometheus", "grafana"}
    assert "contrib" in services["otel-collector"]["image"]
    base = DEPLOY / "compose"
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (base / source).resolve().exists(), source
    collector = yaml.safe_load((base / "otel-collector.yaml").read_text())
    assert collector["exporters"]["otlp/skillgauge"]["endpoint"] == "skillgauge:4317"
    assert "otlp/skillgauge" in collector["service"]["pipelines"]["traces/agents"]["exporters"]
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == ["skillgauge:9464"]


def test_kubernetes_loadbalancer_routes_on_session_id_to_the_headless_service() -> None:
    lb = _docs(DEPLOY / "kubernetes" / "otel-collector-loadbalancer.yaml")
    config = yaml.safe_load(_kind(lb, "ConfigMap")["data"]["config.yaml"])
    exporter = config["exporters"]["loadbalancing"]
    assert exporter["routing_key"] == "attributes"
    assert exporter["routing_attributes"] == ["session.id"]
    assert exporter["resolver"]["k8s"]["service"] == "skillgauge-headless.skillgauge"
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
    assert container["envFrom"][0]["secretRef"]["name"] == _kind(sg, "Secret")["metadata"]["name"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert (DEPLOY / "kubernetes" / "README.md").exists()
