"""The benchmark's short mode runs in CI so it cannot rot (its figures are not asserted:
speed is measured by running the benchmark, not by timed unit tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PERF = Path(__file__).parent / "perf"


def perf(script: str, *args: str) -> list[str]:
    """The lines a script in tests/perf prints, once it has exited cleanly."""
    run = subprocess.run(
        [sys.executable, str(PERF / script), *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()


def _served_by_each_replica(figures: dict[str, Any], replicas: int) -> None:
    """Every replica acknowledged spans and used CPU; the machine's rate is their sum."""
    assert figures["replicas"] == replicas
    rates = figures["replica_spans_per_s"]
    assert len(rates) == replicas and all(rate > 0 for rate in rates), rates
    assert abs(figures["ingest_spans_per_s"] - sum(rates)) <= replicas  # each rounded on its own
    cpu = figures["cpu_us_per_span"]
    assert sorted(cpu) == [f"replica {n}" for n in range(replicas)] and all(us > 0 for us in cpu.values()), (
        cpu
    )
    _cpu_figures(figures)


def _cpu_figures(figures: dict[str, Any]) -> None:
    """The CPU time a span of each way of running the chain, and their ratios as stated."""
    for key in ("decode", "served", "inprocess", "detect"):
        assert figures[f"{key}_cpu_us_per_span"] > 0, key
    served = figures["served_cpu_us_per_span"]
    windows = figures["served_cpu_us_per_span_windows"]
    median = figures["served_cpu_us_per_span_median"]
    # A window that took no span in (the queue grew by what was acknowledged) has no figure.
    counted = [w for w in windows if w is not None]
    assert len(windows) >= 3 and counted, windows
    assert min(counted) - 0.05 <= median <= max(counted) + 0.05, windows
    assert (
        abs(figures["served_over_decode"] - served / figures["decode_cpu_us_per_span"])
        < 0.02 * (figures["served_over_decode"])
    )
    assert (
        abs(figures["served_over_inprocess"] - served / figures["inprocess_cpu_us_per_span"])
        < 0.02 * (figures["served_over_inprocess"])
    )
    detect, decode = figures["detect_cpu_us_per_span"], figures["decode_cpu_us_per_span"]
    assert abs(figures["detect_over_decode"] - detect / decode) < 0.02 * figures["detect_over_decode"]
    rounds = figures["detect_over_decode_rounds"]
    assert rounds and all(ratio > 0 for ratio in rounds), rounds


def test_bench_short_mode_prints_its_figures_as_the_last_line() -> None:
    lines = perf("bench.py", "--short", "--replicas", "2")
    figures = json.loads(lines[-1])
    for key in (
        "ingest_spans_per_s",
        "decode_limit_spans_per_s",
        "ratio",
        "export_p99_ms",
        "rss_bytes_per_open_session",
        "detect_us_per_span",
        "long_session_detect_us_per_span",
        "long_session_wide_detect_us_per_span",
        "short_session_wide_detect_us_per_span",
        "long_session_held_detect_us_per_span",
        "short_session_held_detect_us_per_span",
        "long_session_one_request_detect_us_per_span",
        "long_session_held_one_request_detect_us_per_span",
        "eval_lag_p95_s",
        "judge_input_tokens_ratio",
    ):
        assert figures[key] > 0, key
    assert figures["short"] is True
    _served_by_each_replica(figures, 2)
    # The machine's ingest (every replica's) over the one-core decode limit.
    assert abs(figures["ratio"] - figures["ingest_spans_per_s"] / figures["decode_limit_spans_per_s"]) < 0.001
    assert any(line.startswith("  per replica:") for line in lines)


def test_bench_ingest_only_mode_measures_the_saturation_phase_alone() -> None:
    lines = perf("bench.py", "--short", "--ingest-only", "--replicas", "2")
    figures = json.loads(lines[-1])
    _served_by_each_replica(figures, 2)
    assert figures["export_p99_ms"] > 0  # the acknowledgements at half load
    # ... and by protocol: each replica has gRPC and HTTP clients.
    for key in ("export_grpc_p50_ms", "export_grpc_p99_ms", "export_http_p50_ms", "export_http_p99_ms"):
        assert figures[key] > 0, key
    # ... beside the full collections that paused a replica meanwhile (a count, most often 0).
    assert figures["export_full_collections"] >= 0 and figures["export_full_collections"] == int(
        figures["export_full_collections"]
    )
    assert any(line.startswith("at 50% load") and "full collections in the phase" in line for line in lines)
    assert not any(line.startswith(("a long session", "open sessions", "judged")) for line in lines)
    # The served CPU split by thread: the event loop's among them.
    assert any(line.startswith("  CPU a span served") and " loop " in line for line in lines)


def test_a_window_that_took_no_span_in_has_no_figure_and_the_figures_stay_json() -> None:
    """A served window whose acknowledgements the assembler queues' growth outweighs (a slow
    stretch of a short run) has no figure: null in the figures, which stay strict JSON, and
    the median is that of the windows that have one."""
    sys.path.insert(0, str(PERF))
    import bench

    paired = bench.Paired(limit=1.0, decode_us=10.0, detect_us=25.0, ratios=[2.5])
    figures = bench.cpu_figures(paired, 80.0, 70.0, [float("nan"), 80.1, 87.9], 84.0)
    assert json.loads(json.dumps(figures, allow_nan=False)) == figures
    assert figures["served_cpu_us_per_span_windows"] == [None, 80.1, 87.9]
    _cpu_figures(figures)


def test_bench_routes_whole_sessions_to_replicas() -> None:
    """Each request split by session: every span of a session (and of its traces) on one
    replica, no span lost, every replica given some."""
    sys.path.insert(0, str(PERF))
    import bench

    bodies, spans = bench.requests_for(60)
    routed, owned = bench.route(bodies, 3)
    assert sum(bench.span_count(b) for requests in routed for b in requests) == spans
    assert all(owned) and sum(len(names) for names in owned) == len(set().union(*owned)) == 60
    names: list[set[str]] = [set(), set(), set()]
    traces: list[set[bytes]] = [set(), set(), set()]
    for n, requests in enumerate(routed):
        for body in requests:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        names[n].add(
                            bench._session_of(span.attributes) or bench._session_of(rs.resource.attributes)
                        )
                        traces[n].add(span.trace_id)
        names[n].discard("")  # spans linked to their session by their trace only
        assert names[n] == set(owned[n])
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert not names[a] & names[b] and not traces[a] & traces[b], (a, b)


def test_clients_of_a_replica_send_its_requests_in_one_sequence_of_passes() -> None:
    """Clients sharing a replica's requests take them in turn, whatever their pace: every
    request of the sequence of passes is sent once, each with its own pass's ids, and each
    client goes forward through it (a client walking its own share at its own pace drifted
    passes apart from the others)."""
    import multiprocessing as mp
    import threading

    sys.path.insert(0, str(PERF))
    import bench

    bodies = bench.requests_for(60, spans_per_request=64)[0][:3]
    turn = mp.Value("q", 0)
    sent: dict[str, list[bytes]] = {"fast": [], "slow": []}
    out: Any = type("Out", (), {"put": lambda self, item: None})()

    def client(name: str, pause: float) -> None:
        def send(body: bytes) -> None:
            sent[name].append(body)
            time.sleep(pause)  # one client three times as slow as the other

        bench._drive(0, send, bodies, 0.6, 0.0, 0.0, out, 0, turn)

    threads = [threading.Thread(target=client, args=args) for args in (("fast", 0.005), ("slow", 0.015))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    count = len(sent["fast"]) + len(sent["slow"])
    expected = [bench.fresh(bodies[at % len(bodies)], at // len(bodies)) for at in range(count)]
    assert count > 2 * len(bodies) and sent["slow"]  # a few passes, both clients sending
    assert sorted(sent["fast"] + sent["slow"]) == sorted(expected)
    place = {body: at for at, body in enumerate(expected)}
    for name, bodies_sent in sent.items():
        places = [place[body] for body in bodies_sent]
        assert places == sorted(places), name


def test_a_long_session_is_sent_in_requests_a_receiver_takes() -> None:
    """``in_requests``: every span of the long session, in order, in requests within the limit,
    each as full as the limit allows; a span alone over the limit is refused."""
    sys.path.insert(0, str(PERF))
    import bench

    body = bench.long_session(60, salt=1)
    whole = ExportTraceServiceRequest()
    whole.ParseFromString(body)
    limit = len(body) // 5
    requests = bench.in_requests(body, limit)
    assert all(len(request) <= limit for request in requests)
    spans = []
    for n, raw in enumerate(requests):
        request = ExportTraceServiceRequest()
        request.ParseFromString(raw)
        (rs,) = request.resource_spans
        assert rs.resource == whole.resource_spans[0].resource
        assert rs.scope_spans[0].scope == whole.resource_spans[0].scope_spans[0].scope
        spans += list(rs.scope_spans[0].spans)
        if n + 1 < len(requests):  # the next span would not have fitted
            following = whole.resource_spans[0].scope_spans[0].spans[len(spans)]
            assert len(raw) + following.ByteSize() > limit
    assert spans == list(whole.resource_spans[0].scope_spans[0].spans)
    largest = max(span.ByteSize() for span in spans)
    with pytest.raises(ValueError, match="a span alone"):
        bench.in_requests(body, largest)


def test_judge_call_cost_prints_a_line_for_each_way() -> None:
    lines = perf("judge_call_cost.py", "--calls", "20", "--rounds", "1")
    assert [line.split()[0] for line in lines] == ["sdk", "aiohttp", "judge"]
    assert all(float(line.split()[1]) > 0 for line in lines)


def test_detect_shares_prints_a_share_for_each_stage() -> None:
    lines = perf("detect_shares.py", "--sessions", "20", "--rounds", "1")
    assert lines[0].startswith("detect_cost: ")
    stages = [line for line in lines[2:] if line.rstrip().endswith("%")]
    assert len(stages) >= 20  # every stage timed: none of the functions it wraps is missing
    assert any(line.startswith("observe_span") for line in stages)


def test_session_cost_prints_a_line_for_each_step() -> None:
    lines = perf("session_cost.py", "--sessions", "40", "--rounds", "1")[1:]
    assert [line.split()[0] for line in lines] == [
        "close",
        "plan",
        "results",
        "coverage",
        "metrics",
        "index",
        "index_dicts",
        "all",
    ]
    assert all(float(line.split()[1]) > 0 for line in lines)


def test_the_traffic_written_as_files_replays_through_the_whole_chain(tmp_path: Path) -> None:
    """``--write-traffic``: three passes of the short traffic, each with its own sessions, that
    ``skillgauge replay`` takes whole (the chain in one process, for profiling)."""
    lines = perf("bench.py", "--short", "--write-traffic", str(tmp_path))
    files = sorted(tmp_path.glob("*.binpb"))
    assert (
        files
        and lines[-1] == f"wrote {len(files)} requests ({sum(_spans(f) for f in files)} spans) to {tmp_path}"
    )
    run = subprocess.run(
        [sys.executable, "-m", "collector", "replay", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in run.stdout.splitlines()]
    sessions = [record["coverage"]["session_id"] for record in records if "coverage" in record]
    assert len(sessions) == len(set(sessions)) == 3 * 200  # --short re-keys 200 sessions a pass


def _spans(path: Path) -> int:
    request = ExportTraceServiceRequest()
    request.ParseFromString(path.read_bytes())
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
