"""Scale-out: several ``skillgauge serve`` replicas behind the loadbalancing exporter's
routing (``routing_key: attributes``, ``routing_attributes: [session.id]``, re-implemented
in lb_routing.py).  Every session is evaluated exactly once, on one replica, and a real
Prometheus summing the replicas sees the same totals as one replica that got everything."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from export.downstream import Downstream, attrs
from lb_routing import (
    HashRing,
    drop_unkeyed_spans,
    keyed_traces,
    route,
    routed_apart,
    scattered_sessions,
    shared_traces,
    without_traces,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from promserver import Prometheus, fixture_requests, require, send_grpc
from support import Server, metric_value, wait_for

from collector.otlp.views import value_of


@pytest.fixture(autouse=True, scope="module")
def _needs_prometheus() -> None:
    require("prometheus")


REPLICAS = 3
ROUTING = ["session.id"]
EXPECT = [
    {"when": {"user_message": "release notes"}, "expect": ["release-notes"]},
    {"when": {"user_message": "(?i)csv"}, "expect": ["csv-cleanup"]},
]
SUMMED = (
    "skillgauge_(sessions_closed|sessions_evaluated|sessions_with_expectations|sessions_with_missed_expectations"
    "|sessions_without_skill_load|skill_loads|evaluations|evaluation_verdicts|expected_skill_checks"
    "|expected_skill_misses|received_items|exported_results)_total|skillgauge_evaluation_score_(bucket|count|sum)"
)


def _route_logs(request: ExportLogsServiceRequest, ring: HashRing) -> dict[str, ExportLogsServiceRequest]:
    """Log records by the same key: resource, then scope, then the record's attributes."""
    out: dict[str, ExportLogsServiceRequest] = {}
    for rl in request.resource_logs:
        resource = {kv.key: value_of(kv.value) for kv in rl.resource.attributes}
        for sl in rl.scope_logs:
            scope = {kv.key: value_of(kv.value) for kv in sl.scope.attributes}
            for record in sl.log_records:
                own = {kv.key: value_of(kv.value) for kv in record.attributes}
                key = ""
                for name in ROUTING:
                    value = next((src[name] for src in (resource, scope, own) if name in src), "")
                    key += f"{name}={value}|"
                part = out.setdefault(ring.endpoint_for(key.encode()), ExportLogsServiceRequest())
                target = part.resource_logs.add(resource=rl.resource).scope_logs.add(scope=sl.scope)
                target.log_records.append(record)
    return out


def _without_unkeyed_records(request: ExportLogsServiceRequest, keyed: set[bytes]) -> ExportLogsServiceRequest:
    """``request`` without the log records that carry no routing attribute (on the record or
    its resource) while spans of their trace do."""
    out = ExportLogsServiceRequest()
    out.CopyFrom(request)
    for rl in out.resource_logs:
        on_resource = any(kv.key in ROUTING for kv in rl.resource.attributes)
        for sl in rl.scope_logs:
            kept = [
                record
                for record in sl.log_records
                if on_resource
                or record.trace_id not in keyed
                or any(kv.key in ROUTING for kv in record.attributes)
            ]
            del sl.log_records[:]
            sl.log_records.extend(kept)
    return out


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[Server], Server, list[Downstream], Downstream, Prometheus]]:
    tmp = tmp_path_factory.mktemp("replicas")
    downstreams = [Downstream("grpc") for _ in range(REPLICAS + 1)]
    servers: list[Server] = []
    try:
        for i, downstream in enumerate(downstreams):
            (tmp / str(i)).mkdir()
            servers.append(
                Server(
                    tmp / str(i),
                    {
                        "expectations": EXPECT,
                        "export": {"otlp": {"endpoint": downstream.endpoint}},
                        # Longer than sending every request takes: a session closed before its
                        # log records arrive reopens as revision 2, on the single server and
                        # not on a replica that got its share sooner (or the other way round).
                        "sessions": {"idle_timeout": "4s"},
                    },
                )
            )
        replicas, single = servers[:REPLICAS], servers[REPLICAS]
        prom = Prometheus(
            tmp,
            {
                "replicas": [f"127.0.0.1:{s.status_port}" for s in replicas],
                "single": [f"127.0.0.1:{single.status_port}"],
            },
            rules=False,
        )
        yield replicas, single, downstreams[:REPLICAS], downstreams[REPLICAS], prom
        prom.stop()
    finally:
        for srv in servers:
            srv.stop()
        for downstream in downstreams:
            downstream.stop()


def _settled(metrics: str) -> bool:
    pending = [
        metric_value(metrics, "skillgauge_pending_requests", stage=s) for s in ("assembler", "detection")
    ]
    return pending == [0, 0] and metric_value(metrics, "skillgauge_sessions_open") == 0


def _evaluated(downstream: Downstream) -> tuple[Counter[tuple[str, int]], Counter[tuple[Any, ...]]]:
    sessions: Counter[tuple[str, int]] = Counter()
    results: Counter[tuple[Any, ...]] = Counter()
    for _, span in downstream.spans():
        a = attrs(span.attributes)
        if span.name == "skillgauge.coverage":
            sessions[(a["session.id"], a["skillgauge.session.revision"])] += 1
        else:
            results[
                (
                    a["session.id"],
                    span.name,
                    a.get("gen_ai.skill.name"),
                    a["skillgauge.evaluation.status"],
                    a["skillgauge.evaluation.reason"],
                    a.get("gen_ai.evaluation.score.value"),
                )
            ] += 1
    return sessions, results


def test_every_session_is_evaluated_exactly_once_and_sums_match(cluster: Any) -> None:
    replicas, single, replica_downstreams, single_downstream, prom = cluster
    endpoints = {f"127.0.0.1:{s.grpc_port}": s for s in replicas}
    ring = HashRing(list(endpoints))
    traces, logs = fixture_requests()
    # As the Collector in front drops them (otel-collector-loadbalancer.yaml,
    # filter/opencode_internal): OpenCode's own spans, which carry no session.id, would
    # otherwise carry its session's spans in their batches to another replica.
    traces = [drop_unkeyed_spans(request, "opencode", "session.id") for request in traces]
    # A trace that holds several sessions (`opencode serve` runs all of its sessions in one)
    # cannot be split by session: the exporter routes each trace's batch by its first span.
    # Such traffic is documented to go to one replica; it is left out here, as are sessions of
    # several traces whose spans do not all carry session.id (deploy/agents/claude_agent_sdk.md's
    # setup puts it on every span; its recording without that setup is such a session), and
    # traces whose batches route apart (the same cause, within one trace).
    left_out = shared_traces(traces) | scattered_sessions(traces) | routed_apart(traces, ROUTING)
    traces = [without_traces(request, left_out) for request in traces]
    # Log records without session.id go to the replica of the empty key, apart from their
    # trace's spans (Microsoft Agent Framework's gen_ai.*.message events: its spans carry
    # session.id from baggage, its log records do not); deploy/kubernetes asks for session.id
    # on log records too, or for such logs not to be exported.  Left out, as above.
    keyed = keyed_traces(traces)
    logs = [_without_unkeyed_records(request, keyed) for request in logs]

    per_replica: dict[str, list[Any]] = {e: [] for e in endpoints}
    for request in traces:
        for endpoint, part in route(request, ring, ROUTING):
            per_replica[endpoint].append(part)
    per_replica_logs: dict[str, list[Any]] = {e: [] for e in endpoints}
    for log_request in logs:
        for endpoint, part in _route_logs(log_request, ring).items():
            per_replica_logs[endpoint].append(part)
    assert sum(1 for parts in per_replica.values() if parts) == REPLICAS  # the sessions spread out

    for endpoint, srv in endpoints.items():
        send_grpc(srv.grpc_port, per_replica[endpoint], per_replica_logs[endpoint])
    send_grpc(single.grpc_port, traces, logs)
    for srv in [*replicas, single]:
        # Acknowledged is not yet assembled: no session is open in the gap before a request
        # that would open (or reopen) one is assembled.
        wait_for(lambda s=srv: _settled(s.metrics()), timeout=30)
        wait_for(
            lambda s=srv: metric_value(s.metrics(), "skillgauge_export_backlog", exporter="otlp_traces") == 0,
            timeout=30,
        )

    # Exactly once: no session (revision) evaluated on two replicas, none missing, same results.
    union_sessions: Counter[tuple[str, int]] = Counter()
    union_results: Counter[tuple[Any, ...]] = Counter()
    for downstream in replica_downstreams:
        sessions, results = _evaluated(downstream)
        union_sessions += sessions
        union_results += results
    single_sessions, single_results = _evaluated(single_downstream)
    assert len(single_sessions) > 40
    assert max(union_sessions.values()) == 1
    assert union_sessions == single_sessions
    assert union_results == single_results

    # Prometheus: the replicas' sums equal the single replica's totals, series by series.
    names = sorted(
        {line.split("{")[0].split(" ")[0] for line in single.metrics().splitlines() if re.match(SUMMED, line)}
    )

    def totals(job: str) -> dict[tuple[tuple[str, str], ...], float]:
        out = {}
        for name in names:
            for sample in prom.query(f'sum without (instance, job) ({name}{{job="{job}"}})'):
                key = tuple(sorted({**sample["metric"], "__name__": name}.items()))
                out[key] = float(sample["value"][1])
        return out

    with contextlib.suppress(TimeoutError):  # the assertion below shows any difference
        wait_for(
            lambda: totals("single") and totals("replicas") == totals("single"), timeout=20, interval=0.5
        )
    replicas_total, single_total = totals("replicas"), totals("single")
    assert len(single_total) > 50
    assert replicas_total == single_total
    closed = [v for k, v in single_total.items() if ("__name__", "skillgauge_sessions_closed_total") in k]
    assert sum(closed) == len(single_sessions)


def test_routing_matches_the_documented_ring() -> None:
    ring = HashRing(["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"])
    # Stable and order-independent (the resolver sorts endpoints).
    assert ring.endpoint_for(b"session.id=abc|") == HashRing(
        ["10.0.0.3:4317", "10.0.0.1:4317", "10.0.0.2:4317"]
    ).endpoint_for(b"session.id=abc|")
    spread = Counter(ring.endpoint_for(f"session.id=s-{i}|".encode()) for i in range(3000))
    assert len(spread) == 3 and min(spread.values()) > 500
    # Adding a replica moves only part of the sessions (consistent hashing).
    bigger = HashRing(["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317", "10.0.0.4:4317"])
    moved = sum(
        ring.endpoint_for(k) != bigger.endpoint_for(k)
        for k in (f"session.id=s-{i}|".encode() for i in range(3000))
    )
    assert moved < 1500
