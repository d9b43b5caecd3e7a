"""Scale-out: several ``skillgauge serve`` replicas behind the real OpenTelemetry Collector
(deploy/otelcol's distribution running deploy/kubernetes' loadbalancing config, its resolver
a static list of the replicas).  Every recorded session is evaluated exactly once, on one
replica, and a real Prometheus summing the replicas sees the same totals as one replica that
got everything."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from export.downstream import Downstream, attrs
from lb_routing import (
    keyed_traces,
    partly_keyed_traces,
    scattered_sessions,
    shared_traces,
    without_traces,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from otelcol_support import Otelcol, k8s_config, otelcol_binary, with_static_replicas
from promserver import Prometheus, fixture_requests, require, send_grpc
from support import Server, metric_value, wait_for


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
) -> Iterator[tuple[list[Server], Server, list[Downstream], Downstream, Prometheus, Otelcol]]:
    otelcol_binary()  # fail first, and plainly, without a Collector
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
                        # The single server takes 743 trace requests one at a time, each
                        # answered after its sync: ~4.5 s on a busy 2-core machine.
                        "sessions": {"idle_timeout": "10s"},
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
        (tmp / "otelcol").mkdir()
        endpoints = [f"127.0.0.1:{s.grpc_port}" for s in replicas]
        collector = Otelcol(tmp / "otelcol", with_static_replicas(k8s_config(), endpoints))
        yield replicas, single, downstreams[:REPLICAS], downstreams[REPLICAS], prom, collector
        collector.stop()
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
    replicas, single, replica_downstreams, single_downstream, prom, collector = cluster
    traces, logs = fixture_requests()
    # A trace that holds several sessions cannot be split by session: the exporter routes each
    # trace's batch by its first span.  Such traffic is documented to go to one replica; it is
    # left out here, as are sessions of several traces whose spans do not all carry session.id
    # (deploy/agents/claude_agent_sdk.md's setup puts it on every span; its recording without that
    # setup is such a session), and traces whose spans do not all carry it (the same cause,
    # within one trace: the exporter keys each batch of a trace by its first span).  OpenCode
    # and Kilo Code CLI go by process (service.instance.id) instead and are kept.
    left_out = shared_traces(traces) | scattered_sessions(traces) | partly_keyed_traces(traces)
    traces = [without_traces(request, left_out) for request in traces]
    # Log records without session.id go to the replica of the empty key, apart from their
    # trace's spans (Microsoft Agent Framework's gen_ai.*.message events: its spans carry
    # session.id from baggage, its log records do not); deploy/kubernetes asks for session.id
    # on log records too, or for such logs not to be exported.  Left out, as above.
    keyed = keyed_traces(traces)
    logs = [_without_unkeyed_records(request, keyed) for request in logs]

    send_grpc(collector.grpc_port, traces, logs)
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
    assert all(_evaluated(d)[0] for d in replica_downstreams)  # the sessions spread out
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
