"""The real OpenTelemetry Collector (deploy/otelcol's distribution, built by
deploy/otelcol/build) with the configs shipped under deploy/, in front of real
``skillgauge serve`` replicas: every config validates; the loadbalancing exporter keeps each
session whole on one replica; a replica killed and restarted loses nothing and counts nothing
twice; backpressure is retried after the delay skillgauge asks for; OpenCode and Kilo Code
CLI sessions, named only on some spans and in some log lines, route whole."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from export.downstream import Downstream
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otelcol_support import (
    BINARY_ENV,
    BUILD,
    Otelcol,
    collector_configs,
    compose_config,
    coverage,
    evaluated_on,
    free_port,
    k8s_config,
    otelcol_binary,
    recorded,
    validate,
    with_static_replicas,
)
from perf.bench import fresh, is_session_key, requests_for, templates
from promserver import send_grpc
from support import Server, metric_value, wait_for

from collector.otlp.views import value_of

REPLICAS = 3
IDLE = "10s"  # longer than a replica's restart plus the Collector's retry backoff (1-3 s)
OPENCODE_FAMILY = ("opencode", "kilo_cli")  # resource service.name "opencode"
SPANS = "skillgauge.session.spans"
BENCH = re.compile(r"r[0-9]{12}$")  # the benchmark's session ids, as ``fresh`` re-keys them


def test_every_collector_config_under_deploy_validates(tmp_path: Path) -> None:
    configs = collector_configs()
    assert {where.split("#")[0] for where in configs} == {
        "deploy/compose/otel-collector.yaml",
        "deploy/kubernetes/otel-collector-loadbalancer.yaml",
    }
    for where, config in configs.items():
        if "kubernetes" in where:  # the k8s resolver needs a cluster to start, not to validate
            assert "k8s" in config["exporters"]["load_balancing"]["resolver"]
        run = validate(config, tmp_path)
        assert run.returncode == 0, f"{where}:\n{run.stdout}{run.stderr}"
    broken = compose_config()
    broken["exporters"]["otlp_grpc/skillgauge"]["retry_on_failure"]["initial_intervl"] = "1s"
    run = validate(broken, tmp_path)  # the validation can fail: a typo is named
    assert run.returncode != 0 and "initial_intervl" in run.stdout + run.stderr


def test_the_build_is_cached_by_the_manifest_hash_and_holds_exactly_our_components() -> None:
    run = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stderr[-3000:]
    built = Path(run.stdout.strip().splitlines()[-1])
    manifest = BUILD.parent / "builder-config.yaml"
    assert built.parent.name == hashlib.sha256(manifest.read_bytes()).hexdigest()[:16]
    assert not built.is_relative_to(BUILD.parents[2])  # cached outside the repository
    if BINARY_ENV not in os.environ:
        assert built.samefile(otelcol_binary())
    components = yaml.safe_load(
        subprocess.run([str(built), "components"], capture_output=True, text=True, timeout=60).stdout
    )
    assert components["buildinfo"]["version"] == "0.161.0"
    names = {kind: {c["name"] for c in components[kind]} for kind in ("receivers", "exporters", "processors",
                                                                      "extensions")}
    assert names == {
        "receivers": {"otlp"},
        "exporters": {"load_balancing", "otlp_grpc", "otlp_http"},
        "processors": {"batch", "filter", "memory_limiter", "transform"},
        "extensions": {"file_storage", "health_check"},
    }
    modules = [c["module"].split() for kind in names for c in components[kind]]
    assert {v for m, v in modules if m.startswith("go.opentelemetry.io/collector/")} == {"v0.161.0"}
    assert {v for m, v in modules if "opentelemetry-collector-contrib" in m} == {"v0.161.0"}


# -- the cluster: three replicas behind the shipped loadbalancer, one reference replica --------


@dataclass
class Cluster:
    replicas: list[Server]
    downstreams: list[Downstream]
    single: Server
    single_downstream: Downstream
    collector: Otelcol
    extra: list[dict[str, Any]]  # each replica's config, to restart it with
    started: list[Server]  # every server to stop at the end


def _replica(tmp: Path, downstream: Downstream, port: int | None = None, **sessions: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "export": {"otlp": {"endpoint": downstream.endpoint}},
        "sessions": {"idle_timeout": IDLE, **sessions},
    }
    if port is not None:
        extra["receivers"] = {"otlp": {"grpc": {"endpoint": f"127.0.0.1:{port}"}}}
    tmp.mkdir(parents=True, exist_ok=True)
    return extra


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    otelcol_binary()  # fail first, and plainly, without a Collector
    tmp = tmp_path_factory.mktemp("otelcol-cluster")
    downstreams = [Downstream("grpc") for _ in range(REPLICAS + 1)]
    servers: list[Server] = []  # every replica started, restarted ones too (the kill test adds them)
    collector = None
    try:
        extra = [_replica(tmp / f"replica-{n}", downstreams[n]) for n in range(REPLICAS)]
        servers = [Server(tmp / f"replica-{n}", extra[n], wait=False) for n in range(REPLICAS)]
        servers.append(Server(tmp / "single", _replica(tmp / "single", downstreams[REPLICAS]), wait=False))
        for srv in servers:
            srv.wait_ready(timeout=60)
        # Each replica bound a port of its own (port 0); a restarted one listens there again,
        # where the Collector sends.
        ports = [srv.grpc_port for srv in servers[:REPLICAS]]
        for n, port in enumerate(ports):
            extra[n]["receivers"] = {"otlp": {"grpc": {"endpoint": f"127.0.0.1:{port}"}}}
        (tmp / "otelcol").mkdir()
        config = with_static_replicas(k8s_config(), [f"127.0.0.1:{port}" for port in ports])
        collector = Otelcol(tmp / "otelcol", config)
        yield Cluster(servers[:REPLICAS], downstreams[:REPLICAS], servers[REPLICAS], downstreams[REPLICAS],
                      collector, extra, servers)
    finally:
        if collector is not None:
            collector.stop()
        for srv in servers:
            srv.stop()
        for downstream in downstreams:
            downstream.stop()


def bench_traffic(round_: int, spans_per_request: int = 512) -> tuple[list[ExportTraceServiceRequest], Counter[str]]:
    """The benchmark's traffic (every recorded session of tests/perf/bench.py's templates,
    re-keyed to new sessions; a new set for each ``round_``) with ``session.id`` on every span,
    as deploy/kubernetes asks of agents, and the spans each session has."""
    bodies, _ = requests_for(len(templates()), spans_per_request)
    requests = []
    session_of: dict[bytes, str] = {}
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(fresh(body, round_))
        requests.append(request)
        for span in _spans(request):
            named = [value_of(kv.value) for kv in span.attributes if is_session_key(kv.key)]
            if named:
                session_of.setdefault(span.trace_id, str(named[0]))
    for request in requests:
        for span in _spans(request):
            if not any(kv.key == "session.id" for kv in span.attributes):
                span.attributes.add(key="session.id").value.string_value = session_of[span.trace_id]
    return requests, spans_of(requests)


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    return (span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans)


def spans_of(requests: list[ExportTraceServiceRequest]) -> Counter[str]:
    """The spans each session (``session.id``) has in ``requests``."""
    return Counter(
        str(value_of(kv.value)) for r in requests for span in _spans(r) for kv in span.attributes if kv.key == "session.id"
    )


def one_session_each(requests: list[ExportTraceServiceRequest]) -> list[ExportTraceServiceRequest]:
    """The spans of ``requests`` as one request per session (resource and scope kept)."""
    out: dict[str, ExportTraceServiceRequest] = {}
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    session = next(str(value_of(kv.value)) for kv in span.attributes if kv.key == "session.id")
                    part = out.setdefault(session, ExportTraceServiceRequest())
                    scope = part.resource_spans.add(resource=rs.resource).scope_spans.add(scope=ss.scope)
                    scope.spans.append(span)
    return list(out.values())


def settled(servers: list[Server]) -> bool:
    for srv in servers:
        metrics = srv.metrics()
        if metric_value(metrics, "skillgauge_sessions_open") or metric_value(
            metrics, "skillgauge_export_backlog", exporter="otlp_traces"
        ):
            return False
    return True


def whole_once(cluster: Cluster, spans: Counter[str]) -> None:
    """Every session of ``spans`` was evaluated on exactly one replica, once (revision 1 only),
    with every span it was sent and none twice."""
    where = evaluated_on(cluster.downstreams)
    summaries = {key: a for d in cluster.downstreams for key, a in coverage(d).items() if key[0] in spans}
    assert {s: len(where.get(s, [])) for s in spans} == dict.fromkeys(spans, 1)
    assert sorted(summaries) == sorted((s, 1) for s in spans)
    assert {s: a["skillgauge.session.spans"] for (s, _), a in summaries.items()} == dict(spans)


def test_loadbalancing_keeps_every_bench_session_whole_on_one_replica(cluster: Cluster) -> None:
    requests, spans = bench_traffic(round_=1)
    assert len(spans) > 100  # every recorded session of the benchmark's templates
    send_grpc(cluster.collector.grpc_port, requests)
    wait_for(lambda: settled(cluster.replicas) and len(evaluated_on(cluster.downstreams)) >= len(spans),
             timeout=90, interval=0.5)
    whole_once(cluster, spans)
    per_replica = Counter(n for s, ns in evaluated_on(cluster.downstreams).items() if s in spans for n in ns)
    assert len(per_replica) == REPLICAS and min(per_replica.values()) > len(spans) // 10  # spread out
    assert "deprecated" not in cluster.collector.log()  # the configs name components as this release does


def test_opencode_and_kilo_sessions_route_whole_by_process(cluster: Cluster) -> None:
    traces, logs, groups = recorded(OPENCODE_FAMILY)
    sessions = set().union(*groups)
    assert len(sessions) >= 20
    send_grpc(cluster.collector.grpc_port, traces, logs)
    send_grpc(cluster.single.grpc_port, traces, logs)  # the reference: everything on one replica
    # Settled is not enough: a session closed and not yet evaluated is neither open nor in the
    # outbox; each side waits for every session's summary.
    wait_for(lambda: settled([*cluster.replicas, cluster.single])
             and sessions <= set(evaluated_on(cluster.downstreams))
             and sessions <= set(evaluated_on([cluster.single_downstream])), timeout=90, interval=0.5)
    where = evaluated_on(cluster.downstreams)
    assert {s: len(where[s]) for s in sessions} == dict.fromkeys(sessions, 1)
    assert len({n for s in sessions for n in where[s]}) > 1  # spread over replicas by process
    # Whole: each session's summary (spans, loads by status, catalog, framework, ...) is the one
    # the single replica that got everything wrote, and no session of a stray trace appeared.
    # Sessions sharing one trace (`opencode serve`) split its unkeyed spans by arrival order, so
    # for them only their sum of spans is compared. A log record with no key that reaches a
    # replica before the span it was logged under (the Collector's logs pipeline may deliver
    # first) waits for that span's session when its trace is bound to several open sessions
    # (tests/sessions/test_shared_trace.py). Known gap, left: one that arrives while its trace
    # is bound to one session, before the session of its span opened, joins the one bound
    # (an extra load in 1 CI run of several), so their loads and results are not compared;
    # the rest of their summaries must match.
    union = {key: a for d in cluster.downstreams for key, a in coverage(d).items() if not BENCH.match(key[0])}
    reference = coverage(cluster.single_downstream)
    assert {key[0] for key in reference} == sessions
    assert sorted(union) == sorted(reference)
    for group in groups:
        keys = [(s, 1) for s in group]
        assert sum(union[k].pop(SPANS) for k in keys) == sum(reference[k].pop(SPANS) for k in keys)
        if len(group) > 1:
            for side in (union, reference):
                for k in keys:
                    for name in [n for n in side[k] if n.startswith(("skillgauge.loads.", "skillgauge.results."))]:
                        del side[k][name]
    differing = {
        key: {n: (union[key].get(n), reference[key].get(n)) for n in {*union[key], *reference[key]}
              if union[key].get(n) != reference[key].get(n)}
        for key in reference if union[key] != reference[key]
    }
    assert not differing, differing  # each session's summary: (cluster, single replica)


def test_a_replica_killed_and_restarted_while_traffic_flows_loses_and_doubles_nothing(cluster: Cluster) -> None:
    requests, spans = bench_traffic(round_=2, spans_per_request=32)
    victim = 1
    retried_before = len(cluster.collector.retry_intervals())
    sent = threading.Event()
    progress: list[int] = []

    def send() -> None:
        for n, request in enumerate(requests):
            send_grpc(cluster.collector.grpc_port, [request])
            progress.append(n)
            if n == len(requests) // 3:
                sent.set()

    sender = threading.Thread(target=send)
    sender.start()
    assert sent.wait(timeout=60)
    old = cluster.replicas[victim]
    old.proc.kill()  # SIGKILL: nothing flushed, nothing shut down
    old.proc.wait()
    old.stop()
    restarted = Server(old.config_path.parent, cluster.extra[victim])
    cluster.started.append(restarted)
    cluster.replicas[victim] = restarted
    sender.join(timeout=120)
    assert not sender.is_alive() and len(progress) == len(requests)
    wait_for(lambda: settled(cluster.replicas) and spans.keys() <= set(evaluated_on(cluster.downstreams)),
             timeout=120, interval=0.5)
    whole_once(cluster, spans)
    assert any(s for s, ns in evaluated_on(cluster.downstreams).items() if s in spans and ns == [victim])
    assert len(cluster.collector.retry_intervals()) > retried_before  # it did send to the dead replica


def test_the_collector_killed_while_its_replica_is_down_delivers_its_file_queue_after_a_restart(
    tmp_path: Path,
) -> None:
    """The compose config's queue to skillgauge is on file_storage: what the Collector
    acknowledged to agents and could not deliver yet outlives a SIGKILL of the Collector."""
    downstream, backend = Downstream("grpc"), Downstream("http")
    port = free_port()  # the replica's, nobody listening there yet
    config = compose_config()
    config["exporters"]["otlp_grpc/skillgauge"]["endpoint"] = f"127.0.0.1:{port}"
    config["exporters"]["otlp_http/backend"]["endpoint"] = backend.endpoint
    (tmp_path / "otelcol").mkdir()
    collector = Otelcol(tmp_path / "otelcol", config)
    replica = None
    try:
        requests, spans = bench_traffic(round_=4, spans_per_request=64)
        send_grpc(collector.grpc_port, requests)  # acknowledged: in the Collector's queue
        wait_for(lambda: collector.retry_intervals("otlp_grpc/skillgauge"), timeout=30)
        collector.proc.kill()
        collector.stop()
        replica = Server(tmp_path / "replica", _replica(tmp_path / "replica", downstream, port))
        collector = Otelcol(tmp_path / "otelcol", config)  # the same file_storage directory
        wait_for(lambda: settled([replica]) and spans.keys() <= {s for s, _ in coverage(downstream)},
                 timeout=120, interval=0.5)
        summaries = coverage(downstream)
        assert sorted(summaries) == sorted((s, 1) for s in spans)  # each once, no second revision
        assert {s: a["skillgauge.session.spans"] for (s, _), a in summaries.items()} == dict(spans)
    finally:
        collector.stop()
        if replica is not None:
            replica.stop()
        downstream.stop()
        backend.stop()


# -- backpressure: one replica behind the shipped compose Collector -----------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_backpressure_is_retried_after_the_delay_skillgauge_asks_for_and_nothing_is_dropped(
    tmp_path: Path, protocol: str
) -> None:
    """UNAVAILABLE with RetryInfo (the compose config's otlp_grpc exporter) or 503 with
    Retry-After (the same exporter settings on otlp_http), 5 s either way."""
    downstream, backend = Downstream("grpc"), Downstream("http")
    replica = Server(tmp_path / "replica", _replica(tmp_path / "replica", downstream, max_open=2, idle_timeout="1s"))
    collector = None
    try:
        config = compose_config()
        exporter = f"otlp_{protocol}/skillgauge"
        settings = config["exporters"].pop("otlp_grpc/skillgauge")
        settings["endpoint"] = f"127.0.0.1:{replica.grpc_port}" if protocol == "grpc" else replica.http_url
        if protocol == "http":
            del settings["tls"]
        config["exporters"][exporter] = settings
        for pipeline in config["service"]["pipelines"].values():
            pipeline["exporters"] = [exporter if e == "otlp_grpc/skillgauge" else e for e in pipeline["exporters"]]
        config["exporters"]["otlp_http/backend"]["endpoint"] = backend.endpoint
        (tmp_path / "otelcol").mkdir()
        collector = Otelcol(tmp_path / "otelcol", config)
        requests = one_session_each(bench_traffic(round_=3)[0])[:6]
        spans = spans_of(requests)
        send_grpc(collector.grpc_port, requests)
        wait_for(lambda: settled([replica]) and spans.keys() <= {s for s, _ in coverage(downstream)},
                 timeout=120, interval=0.5)
        metrics = replica.metrics()
        refused = metric_value(metrics, "skillgauge_rejected_requests_total", protocol=protocol, signal="traces",
                               reason="backpressure")
        assert refused > 0  # the replica did answer with backpressure
        assert metric_value(metrics, "skillgauge_rejected_items_total", reason="max_open", signal="traces") == 0
        intervals = collector.retry_intervals(exporter)
        assert intervals and min(intervals) >= 5.0  # the 5 s asked for, not the exporter's own 1-1.5 s backoff
        summaries = {s: a for (s, _), a in coverage(downstream).items()}
        assert {s: a["skillgauge.session.spans"] for s, a in summaries.items() if s in spans} == dict(spans)
    finally:
        if collector is not None:
            collector.stop()
        replica.stop()
        downstream.stop()
        backend.stop()
