"""TLS and mutual TLS on both receivers and the status API, with the real SDK exporters; and
the clear errors an operator gets for unusable certificates or a wrong bind address."""

from __future__ import annotations

import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, readable_spans, trace_requests
from tls_certs import Pair, Pki

from collector.config import ConfigError, parse

FAIL_FAST = 2  # seconds: a refused handshake looks retryable (UNAVAILABLE) to the SDK


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Server]:
    mtls = {"cert_file": str(pki.server.cert), "key_file": str(pki.server.key), "client_ca_file": str(pki.ca)}
    config = {
        "receivers": {"otlp": {"grpc": {"tls": mtls}, "http": {"tls": mtls}}},
        "status": {"tls": {"cert_file": str(pki.server.cert), "key_file": str(pki.server.key)}},
    }
    srv = Server(Path(tmp_path_factory.mktemp("tls")), config, status_ssl=pki.client_context(with_cert=False))
    yield srv
    srv.stop()


def _spans(name: str) -> list[ReadableSpan]:
    (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
    return readable_spans(request)


def _grpc(srv: Server, pki: Pki, client: Pair | None, timeout: float = 10) -> GrpcSpanExporter:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki.ca.read_bytes(),
        private_key=client.key.read_bytes() if client else None,
        certificate_chain=client.cert.read_bytes() if client else None,
    )
    return GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", credentials=credentials, timeout=timeout)


def test_grpc_mtls_requires_a_client_certificate_from_the_configured_ca(tls_server: Server, pki: Pki) -> None:
    spans = _spans("right_skill")
    assert _grpc(tls_server, pki, None, FAIL_FAST).export(spans) == SpanExportResult.FAILURE
    assert _grpc(tls_server, pki, pki.rogue_client, FAIL_FAST).export(spans) == SpanExportResult.FAILURE
    plaintext = GrpcSpanExporter(
        endpoint=f"127.0.0.1:{tls_server.grpc_port}", insecure=True, timeout=FAIL_FAST
    )
    assert plaintext.export(spans) == SpanExportResult.FAILURE
    assert tls_server.get_json("/v1/sessions/strands-right_skill-0001")[0] == 404

    assert _grpc(tls_server, pki, pki.client).export(spans) == SpanExportResult.SUCCESS
    assert tls_server.get_json("/v1/sessions/strands-right_skill-0001")[0] == 200


def test_http_mtls_requires_a_client_certificate_from_the_configured_ca(tls_server: Server, pki: Pki) -> None:
    url = f"https://127.0.0.1:{tls_server.http_port}/v1/traces"
    spans = _spans("no_skill")

    def exporter(client: Pair | None, timeout: float = 10) -> HttpSpanExporter:
        # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the exporter's CA file;
        # a session that ignores the environment keeps the test independent of the host.
        session = requests.Session()
        session.trust_env = False
        return HttpSpanExporter(
            session=session,
            endpoint=url,
            certificate_file=str(pki.ca),
            client_certificate_file=str(client.cert) if client else None,
            client_key_file=str(client.key) if client else None,
            timeout=timeout,
        )

    assert exporter(None, FAIL_FAST).export(spans) == SpanExportResult.FAILURE
    assert exporter(pki.rogue_client, FAIL_FAST).export(spans) == SpanExportResult.FAILURE
    assert tls_server.get_json("/v1/sessions/strands-no_skill-0001")[0] == 404

    assert exporter(pki.client).export(spans) == SpanExportResult.SUCCESS
    assert tls_server.get_json("/v1/sessions/strands-no_skill-0001")[0] == 200


def test_status_api_over_tls(tls_server: Server, pki: Pki) -> None:
    assert tls_server.status_url.startswith("https://")
    assert tls_server.get_json("/readyz")[0] == 200
    assert "skillgauge_requests_total" in tls_server.metrics()
    with pytest.raises(urllib.error.URLError):  # a client that does not trust the CA
        urllib.request.urlopen(
            f"{tls_server.status_url}/healthz", timeout=5, context=ssl.create_default_context()
        )


def _tls_error(tls: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as err:
        parse({"receivers": {"otlp": {"http": {"endpoint": "127.0.0.1:4318", "tls": tls}}}})
    return str(err.value)


def test_unusable_certificates_are_config_errors_naming_the_field(pki: Pki, tmp_path: Path) -> None:
    missing = _tls_error({"cert_file": str(tmp_path / "nope.crt"), "key_file": str(pki.server.key)})
    assert missing.startswith("receivers.otlp.http.tls: cannot load cert_file") and "nope.crt" in missing
    mismatched = _tls_error({"cert_file": str(pki.server.cert), "key_file": str(pki.client.key)})
    assert "the key matching the certificate" in mismatched
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    bad_ca = _tls_error(
        {
            "cert_file": str(pki.server.cert),
            "key_file": str(pki.server.key),
            "client_ca_file": str(tmp_path / "garbage.pem"),
        }
    )
    assert "cannot load client_ca_file" in bad_ca


def test_status_endpoint_not_on_this_host_fails_with_a_clear_error(tmp_path: Path) -> None:
    config = {
        "receivers": {"otlp": {"grpc": None, "http": None}},
        "status": {"endpoint": "192.0.2.1:9464"},  # TEST-NET-1: never an address of this host
        "storage": {"path": ":memory:"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "collector", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "status.endpoint: cannot listen on 192.0.2.1:9464" in done.stderr
    assert "127.0.0.1 (this host only)" in done.stderr
