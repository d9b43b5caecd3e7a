"""The compose stack's skillgauge config as written: loaded through the real config loader,
and served, a browser that arrives through Docker's port mapping (not loopback) can open
the pages that the dashboard and the alerts link to."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import yaml
from support import Server, outside_address

from collector.cli import load

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose"


def test_the_compose_config_loads_and_opens_the_pages_to_the_mapped_port() -> None:
    config = load(COMPOSE / "skillgauge.yaml", anthropic_env=False)
    assert config.status.endpoint == "0.0.0.0:9464"
    assert config.auth_for(config.status) is None and config.status.sessions_open
    # ... which is safe only because the port is published on the host's loopback alone.
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    assert compose["services"]["skillgauge"]["ports"] == ["127.0.0.1:9464:9464"]
    prometheus = yaml.safe_load((COMPOSE.parent / "prometheus" / "prometheus.yml").read_text())
    assert prometheus["global"]["external_labels"]["skillgauge_url"] == "http://localhost:9464"


def test_served_with_the_compose_settings_a_non_loopback_browser_reads_the_pages(tmp_path: Path) -> None:
    shipped: dict[str, Any] = yaml.safe_load((COMPOSE / "skillgauge.yaml").read_text())
    # The compose settings as they are, on free ports and a temporary spool, exporting nowhere
    # (the collector is not here).
    shipped["status"]["endpoint"] = "0.0.0.0:0"
    shipped.pop("export")
    shipped.pop("storage")
    shipped.pop("receivers")
    srv = Server(tmp_path, shipped)
    try:
        outside = outside_address()
        for path in ("/ui/", "/ui/sessions?evaluation=skill_invoked&passed=false&since=2h", "/v1/sessions"):
            with urllib.request.urlopen(f"http://{outside}:{srv.status_port}{path}", timeout=5) as resp:
                assert resp.status == 200, path
        assert "/v1/sessions open to every client (status.sessions_open: true), /ui/ too" in srv.log()
    finally:
        srv.stop()
