"""skillgauge benchmark: one command, figures on stdout, one JSON object as the last line.

    python tests/perf/bench.py               # full run (a few minutes on 2 cores)
    python tests/perf/bench.py --replicas 2  # the same with two replicas (default: one a core)
    python tests/perf/bench.py --short       # seconds; CI runs this so the benchmark cannot rot
    python tests/perf/bench.py --write-traffic DIR  # the traffic as files, for `skillgauge replay DIR`

Traffic is real: the recorded framework sessions in tests/fixtures/frameworks, re-keyed to
many sessions (new session ids and trace ids), packed into 512-span requests.

Served figures are measured the way skillgauge scales out: N replicas (``--replicas``,
default one a core; 2 with ``--short``), each a real ``skillgauge serve`` subprocess with
its own data dir (default durable SQLite spool) and its own ports (bound as port 0 and read
back from serve's startup line), behind the OpenTelemetry Collector's loadbalancing exporter
with ``routing_key: attributes``, ``routing_attributes: [session.id]``.  Before timing, each
512-span request is split as that exporter splits a batch (``route``): per trace, each trace
to one replica by its session's key ``session.id=<id>|`` (its CRC-32 modulo the replicas: a
stand-in for the exporter's ring, the same on every run; tests/deploy/test_otelcol.py runs
the real Collector in front of replicas), the traces for one replica merged into one request.  Every span of a session goes to one replica.  Each
replica has its own client processes (2 with ``--short``, else 4; gRPC and HTTP in turn:
what one server had before replicas) sending it pre-encoded requests.

Figures:
  replicas                   N, the skillgauge serve processes of the served phases below
  decode_limit_spans_per_s   parse + every attribute to a Python value, same requests, one core
                             (the best of five one-second trials)
  ingest_spans_per_s         acknowledged spans/s at saturation, the machine's: the sum over
                             replicas, over the last 20 s of a 25 s phase (see ``drive``)
  replica_spans_per_s        the same for each replica
  ratio                      ingest (the machine's) / decode limit (one core)
  cpu_us_per_span            CPU a span at saturation, for each replica process (with its child
                             processes' CPU, if it has any), over that replica's spans

CPU figures: process CPU time (user + system), not wall clock, so that they hold on a machine
whose other processes take the cores from time to time (the throughput figures above do not:
they are context).  Microseconds a span:
  decode_cpu_us_per_span     ``decode_one`` (parse + every attribute to a value) under
                             ``time.process_time``, the best of five rounds (one with
                             ``--short``) of ``decode_and_detect``
  served_cpu_us_per_span     receivers to recorded results: every replica's CPU time (all its
                             threads, ``/proc/<pid>/stat`` utime + stime) over the counted part
                             of the saturation phase, divided by the spans the replicas
                             acknowledged in it.  Beside it, the same over five equal windows of
                             the counted part (three with ``--short``), each window's spans those
                             taken in (acknowledged, less the growth of the assembler queues: see
                             ``CpuWindow.windows``): each window's figure
                             (``served_cpu_us_per_span_windows``; null for a window that took no
                             span in) and the median of those with one
                             (``served_cpu_us_per_span_median``), so that a stretch when the
                             machine's other work slowed the replicas shows as one window out of
                             line; the median leaves out work that comes less often than once a
                             window (a full garbage collection), so the ratios use the whole
                             part.  The full run measures it first, as ``--ingest-only`` does,
                             before the long sessions; the
                             line before the JSON splits it by thread
                             (``loop``: the event loop's thread, summed over replicas) and
                             gives the part spent collecting garbage, in whichever thread
                             (``skillgauge_gc_cpu_seconds_total``, read from each replica)
  inprocess_cpu_us_per_span  the same traffic (three passes, fresh ids each; one with
                             ``--short``) through ``skillgauge replay``'s chain in this process
                             (``collector.replay.replay``, store in memory, serve's collector
                             thresholds), under ``time.process_time``; its garbage
                             collections' part printed beside it
  detect_cpu_us_per_span     ``detect_one`` (parse + assemble + detect, as ``detect_cost``) under
                             ``time.process_time``, the best of the same rounds: each round is
                             one pass over the traffic, each request decoded and then detected,
                             so that both figures see the same stretches of the machine
                             (``decode_and_detect``)
  served_over_decode         served / decode: what serving a span costs in decodes of it
  served_over_inprocess      served / in process: what serving adds to the chain itself
  detect_over_decode         detect / decode: what detecting a span costs in decodes of it;
                             beside it, each round's (``detect_over_decode_rounds``), its spread
  export_p99_ms (above) is the acknowledgement p99 at half load; ``--ingest-only`` reports it
  and these figures too, and leaves out memory, long sessions and the judged sessions
  export_p99_ms              Export call latency at 50 % of each replica's ingest rate, over
                             every replica's calls (after the saturation phase's sessions have
                             closed and their requests been deleted); beside it
                             (``export_full_collections``), the full garbage collections the
                             replicas ran in that phase: each pauses its replica's loop
  rss_bytes_per_open_session RSS growth per open session (10,000 sessions x 50 spans routed over
                             the replicas; the replicas' growth summed), with the raw span bytes
                             per session beside it
  detect_us_per_span         detect_cpu_us_per_span again (the name earlier runs' figures have)
  long_session_detect_us_per_span  the same for one long session whose chat spans each record
                             the conversation so far (beside it, the cost of reading each whole),
                             sent in requests of at most 4 MiB (the Collector's default), each
                             parsed and then fed in turn, as serve takes them
  short_session_detect_us_per_span the same spans in sessions of 10 (as many spans in all): the
                             long figure over this one is what a span costs more for the
                             conversation before it
  long_session_wide_detect_us_per_span, short_session_wide_detect_us_per_span  the two above
                             with text that is not ASCII (an em dash in every message)
  long_session_held_detect_us_per_span, short_session_held_detect_us_per_span  the same with
                             the history held in an object (Google ADK's legacy llm_request:
                             model, config, contents)
  long_session_one_request_detect_us_per_span, short_session_one_request_detect_us_per_span,
  long_session_held_one_request_detect_us_per_span, short_session_held_one_request_detect_us_per_span
                             the plain and held figures with each session in one request (93 MB
                             for the long one: over any receiver's limit), as measured before
  eval_lag_p95_s             session close (the ack of the request carrying its end span) to
                             its last evaluation span at a downstream OTLP receiver; one skill's
                             recorded session at 100 sessions/s, fake Anthropic judge; ONE
                             replica (a lag, not a rate: more replicas would only share it out)
  judge_input_tokens_ratio   billed input tokens for those sessions with prompt caching over the
                             same requests without it (the fake server's usage; cache writes bill
                             at 1.25x, reads at 0.1x, as Anthropic prices them); the same
                             single replica

Phoenix is not compared: it is not installed here, and its receiver needs its own server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import http.client
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "deploy"))
# This checkout's code, in process too (an editable install elsewhere must not stand in for it).
sys.path.insert(0, str(HERE.parent.parent))

from export.downstream import Downstream  # noqa: E402
from fake_anthropic import FakeAnthropic  # noqa: E402
from lb_routing import split_traces  # noqa: E402
from support import FRAMEWORKS, Server, metric_value, trace_requests  # noqa: E402

# The collector's modules the in-process measurements run (some may move: repoint them here).
from collector.config import parse  # noqa: E402
from collector.detect import histories as histories_module  # noqa: E402
from collector.otlp.views import value_of  # noqa: E402
from collector.sessions.assembler import Accepted, Assembler  # noqa: E402
from collector.sessions.keys import shaped_keys  # noqa: E402

try:  # the request class the chain parses into; a build from before it parsed OTLP's own
    from collector.otlp.classes import TraceRequest as ParsedRequest
except ModuleNotFoundError:
    ParsedRequest = ExportTraceServiceRequest

# The session keys (of ``sessions.keys``' defaults) that the traffic's recordings use.
SESSION_KEYS = frozenset(
    {
        "session.id",
        "gen_ai.conversation.id",
        "langsmith.metadata.session_id",
        "traceloop.association.properties.session_id",
    }
)


@functools.cache
def is_session_key(name: str) -> bool:
    """A configured session key of the traffic, or an attribute shaped like one (which keys a
    session when no configured key is present): every one is rewritten with the session."""
    return name in SESSION_KEYS or bool(shaped_keys((name,)))


EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ONE_SKILL = FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl"  # loads release-notes, with its body
# Chat spans with growing histories: an array of messages (GenAI semantic conventions), or
# an object holding one (``held``: Google ADK's legacy llm_request, model, config, contents).
LONG_TEMPLATES = {
    False: (FRAMEWORKS / "adk" / "right_skill_content.traces.jsonl", "gen_ai.input.messages"),
    True: (FRAMEWORKS / "adk" / "right_skill_legacy.traces.jsonl", "gcp.vertex.agent.llm_request"),
}
SHORT_TURNS = 10  # chat spans in each short session of ``long_session``'s spans
# The largest request ``long_session_cost`` sends: the OpenTelemetry Collector's default for
# the OTLP messages its receiver takes and its exporters send (gRPC's 4 MiB), well within
# skillgauge's own ``max_request_bytes`` (16 MiB).
LONG_REQUEST_BYTES = 4 * 1024**2
END_ATTRIBUTE = "skillgauge.session.end"
# Anthropic bills cache writes (5-minute TTL) at 1.25x the input price and cache reads at 0.1x.
CACHE_WRITE_PRICE, CACHE_READ_PRICE = 1.25, 0.1
MIN_CACHE_TOKENS = 1024  # the smallest cacheable prefix for Sonnet models
REFUSED_PAUSE = 0.25  # seconds a client waits after a refusal (OTLP exporters back off 1-5 s)
ROUTING_ATTRIBUTE = "session.id"  # the exporter's routing_attributes: [session.id]


# -- traffic -----------------------------------------------------------------------------------


Template = list[tuple[bytes, bytes, bytes]]  # (resource, scope, span), serialized


def templates() -> list[Template]:
    """Recorded sessions whose spans carry content and average 1-2.5 KB (agent spans with
    tool arguments and results): Strands, ADK with content capture, Deep Agents, ..."""
    out = []
    for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")):
        spans: Template = []
        for request in trace_requests(path):
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    spans += [
                        (rs.resource.SerializeToString(), ss.scope.SerializeToString(), s.SerializeToString())
                        for s in ss.spans
                    ]
        mean = sum(len(s) for _, _, s in spans) / max(1, len(spans))
        if 1000 <= mean <= 2500 and _names_a_session(path):
            out.append(spans)
    return out


def _names_a_session(path: Path) -> bool:
    """Whether a recording names its session anywhere (a recording made without one, to show
    an unkeyed trace, is no session the traffic could re-key)."""
    return any(
        is_session_key(kv.key)
        for request in trace_requests(path)
        for rs in request.resource_spans
        for kv in [
            *rs.resource.attributes,
            *(a for ss in rs.scope_spans for sp in ss.spans for a in sp.attributes),
        ]
    )


# Every request's session ids start with SESSION_TAG and its trace ids with TRACE_TAG + a round
# number (zero as encoded); clients rewrite both for each pass over their requests, so that
# every pass carries new sessions and traces instead of repeating spans the server has seen.
SESSION_TAG = b"bench-"
TRACE_TAG = b"SGBNCH"


def rekey(span: Span, session: str, salt: int) -> None:
    """``span`` under session id ``session`` (every session key it carries) and a trace id of
    this benchmark: ``TRACE_TAG``, two zero bytes (a pass's round number, see ``fresh``), then
    the recorded id's low 64 bits XOR ``salt``'s.  Spans of one recorded trace rekeyed with one
    salt share a trace again; another salt (below 2**64) gives another trace."""
    low = (int.from_bytes(span.trace_id, "big") ^ salt) & ((1 << 64) - 1)
    span.trace_id = TRACE_TAG + bytes(2) + low.to_bytes(8, "big")
    for kv in span.attributes:
        if is_session_key(kv.key):
            kv.value.string_value = session


def recorded_session(n: int, name: str) -> ExportTraceServiceRequest:
    """The ``n``-th recorded session of ``templates`` (cycling) as one Export request, under
    session id ``name`` and trace ids of its own: real harness spans, a new session."""
    pool = _templates()
    request = ExportTraceServiceRequest()
    for resource, scope, raw in pool[n % len(pool)]:
        rs = request.resource_spans.add()
        rs.resource.ParseFromString(resource)
        for kv in rs.resource.attributes:
            if is_session_key(kv.key):
                kv.value.string_value = name
        ss = rs.scope_spans.add()
        ss.scope.ParseFromString(scope)
        span = ss.spans.add()
        span.ParseFromString(raw)
        rekey(span, name, n + 1)
    return request


@functools.cache
def _templates() -> list[Template]:
    return templates()


def requests_for(
    sessions: int, spans_per_request: int = 512, spans_per_session: int | None = None
) -> tuple[list[bytes], int]:
    """Pre-encoded Export requests carrying ``sessions`` re-keyed recorded sessions (new
    session ids, new trace ids); optionally padded or cut to ``spans_per_session``."""
    pool = templates()
    bodies: list[bytes] = []
    request = ExportTraceServiceRequest()
    in_request = total = 0
    for n in range(sessions):
        template = pool[n % len(pool)]
        if spans_per_session is not None:
            template = [template[i % len(template)] for i in range(spans_per_session)]
        name, salt = f"{SESSION_TAG.decode()}{n:07d}", (n * 0x9E3779B97F4A7C15) ^ (n + 1)
        last: tuple[bytes, bytes] | None = None
        for i, (resource, scope, raw) in enumerate(template):
            if last != (resource, scope) or not request.resource_spans:
                # Exporters batch spans under one resource and scope; so do we.
                rs = request.resource_spans.add()
                rs.resource.ParseFromString(resource)
                for kv in rs.resource.attributes:
                    if is_session_key(kv.key):
                        kv.value.string_value = name
                ss = rs.scope_spans.add()
                ss.scope.ParseFromString(scope)
                last = (resource, scope)
            span = ss.spans.add()
            span.ParseFromString(raw)
            rekey(span, name, salt)
            if spans_per_session is not None:
                span.span_id = (i + 1).to_bytes(8, "big")
            in_request += 1
            total += 1
            if in_request >= spans_per_request:
                bodies.append(request.SerializeToString())
                request = ExportTraceServiceRequest()
                in_request = 0
                last = None
    if in_request:
        bodies.append(request.SerializeToString())
    return bodies, total


def replica_of(key: str, count: int) -> int:
    """The replica (of ``count``) that a routing key goes to: CRC-32 modulo ``count``, a
    deterministic stand-in for the exporter's consistent-hash ring."""
    return zlib.crc32(key.encode()) % count


def _session_of(attributes: Any) -> str:
    return next((kv.value.string_value for kv in attributes if is_session_key(kv.key)), "")


def route(bodies: list[bytes], count: int) -> tuple[list[list[bytes]], list[list[str]]]:
    """``bodies`` split per replica as the loadbalancing exporter splits each batch it
    receives (``SplitTraces``, then one merged request per endpoint), and the sessions each
    replica got, in order.

    One difference, so that the recordings route as agents configured for it would: the
    exporter reads ``session.id`` from the resource or a trace's first span, while these
    recordings key some sessions by ``gen_ai.conversation.id`` or
    ``langsmith.metadata.session_id`` and leave some spans unkeyed (linked by their trace).
    So a trace's key is ``session.id=<its session's id>|``, the id any of its spans or
    resources carries (deploy/kubernetes asks agents to put ``session.id`` on every span)."""
    requests = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        requests.append(request)
    session_of_trace: dict[bytes, str] = {}
    for request in requests:
        for rs in request.resource_spans:
            on_resource = _session_of(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    name = _session_of(span.attributes) or on_resource
                    if name:
                        session_of_trace.setdefault(span.trace_id, name)
    routed: list[list[bytes]] = [[] for _ in range(count)]
    sessions: list[dict[str, None]] = [{} for _ in range(count)]  # ordered sets
    for request in requests:
        parts = [ExportTraceServiceRequest() for _ in range(count)]
        for trace in split_traces(request):
            name = session_of_trace.get(trace.resource_spans[0].scope_spans[0].spans[0].trace_id, "")
            n = replica_of(f"{ROUTING_ATTRIBUTE}={name}|", count)
            parts[n].resource_spans.extend(trace.resource_spans)  # the exporter's mergeTraces
            sessions[n][name] = None
        for n, part in enumerate(parts):
            if part.resource_spans:
                routed[n].append(part.SerializeToString())
    empty = [n for n, bodies_n in enumerate(routed) if not bodies_n]
    if empty:
        raise SystemExit(f"replicas {empty} get no session of this traffic: run fewer replicas")
    return routed, [list(s) for s in sessions]


def span_count(body: bytes) -> int:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


# -- in-process figures --------------------------------------------------------------------------


def decode_one(body: bytes) -> int:
    """Parse one request plus every attribute to a Python value: the decode limit's work on
    it; returns its spans."""
    done = 0
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for rs in request.resource_spans:
        for kv in rs.resource.attributes:
            value_of(kv.value)
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    value_of(kv.value)
                for event in span.events:
                    for kv in event.attributes:
                        value_of(kv.value)
                done += 1
    return done


@dataclasses.dataclass(frozen=True)
class Paired:
    """The decode limit and detection, measured a request at a time (``decode_and_detect``)."""

    limit: float  # spans/s of the decode's wall time, the best round's
    decode_us: float  # microseconds of CPU time a span to decode, the best round's
    detect_us: float  # microseconds of CPU time a span to parse, assemble and detect, the best round's
    ratios: list[float]  # each round's detection over its decode, in round order


def decode_and_detect(bodies: list[bytes], spans: int, rounds: int) -> Paired:
    """``rounds`` rounds, each one pass over the traffic in which every request is decoded
    (``decode_one``) and then detected (``detect_one``, into one assembler a round, as
    ``detect_cost`` does), each half under ``time.process_time`` of its own; each figure is
    the best of its rounds.  Paired a request at a time (~10-30 ms apart), the two see the
    same stretches of the machine, whose speed moves by a third within seconds: in rounds of
    a one-second decode trial and then a ``detect_cost`` pass, one run's rounds spread 1.9-3.6
    (tests/perf/README.md, "Detection against decode, a request at a time").  Each round's
    detection over its decode is kept, so that their spread shows beside the ratio of the best
    figures."""
    limit, decode_us, detect_us = 0.0, float("inf"), float("inf")
    ratios: list[float] = []
    for _ in range(rounds):
        decoding, detecting, decoding_wall = _paired_round(bodies, spans)
        round_decode, round_detect = decoding / spans * 1e6, detecting / spans * 1e6
        limit = max(limit, spans / decoding_wall)
        decode_us, detect_us = min(decode_us, round_decode), min(detect_us, round_detect)
        ratios.append(round_detect / round_decode)
    return Paired(limit, decode_us, detect_us, ratios)


def _paired_round(bodies: list[bytes], spans: int) -> tuple[float, float, float]:
    """One round of ``decode_and_detect``: seconds of CPU time decoding, of CPU time
    detecting, and of wall time decoding."""
    import gc

    gc.collect()  # the last round's sessions, not counted
    assembler = Assembler(parse({}).sessions, lambda session, reason: None)
    decoded = detected = 0
    decoding = detecting = decoding_wall = 0.0
    clock, wall = time.process_time, time.perf_counter
    with collected_as_served(None) as collect_if_due:
        for n, body in enumerate(bodies):
            began, began_wall = clock(), wall()
            decoded += decode_one(body)
            half, half_wall = clock(), wall()
            detected += detect_one(assembler, n, body)
            collect_if_due()  # serve runs it on its loop, between requests
            detecting += clock() - half
            decoding += half - began
            decoding_wall += half_wall - began_wall
    if decoded != spans or detected != spans:
        raise RuntimeError(f"{spans} spans sent, {decoded} decoded, {detected} detected")
    return decoding, detecting, decoding_wall


def inprocess_cpu(bodies: list[bytes], spans: int, passes: int, extra: dict[str, Any]) -> tuple[float, float]:
    """Microseconds of this process's CPU time a span for the traffic (``passes`` passes, fresh
    ids each, as ``--write-traffic`` writes it) through ``skillgauge replay``'s chain in this
    process: decode, spool (in memory), assemble, detect, close, evaluate, record; and of it,
    the garbage collections' (``GcTimer``).  Collected as serve and replay collect
    (``collected_as_served``)."""
    import asyncio
    import gc

    from collector.replay import ReplayOutcome, replay

    config = parse(extra)

    async def replayed(tmp: str) -> ReplayOutcome:
        with collected_as_served(asyncio.get_running_loop()):
            return await replay([tmp], config)

    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, passes + 1):
            for n, body in enumerate(bodies):
                (Path(tmp) / f"{round_:02d}-{n:04d}.binpb").write_bytes(fresh(body, round_))
        gc.collect()
        timer = GcTimer()
        gc.callbacks.append(timer.observe)
        try:
            cpu = time.process_time()
            outcome = asyncio.run(replayed(tmp))
            used = time.process_time() - cpu
        finally:
            gc.callbacks.remove(timer.observe)
    if outcome.problems:
        raise SystemExit(f"in-process replay of the traffic failed: {outcome.problems[:3]}")
    print(
        "  in process, garbage collection by generation (young, middle, full): "
        + ", ".join(f"{t / (spans * passes) * 1e6:.2f}" for t in timer.by_generation)
        + " us a span; "
        + ", ".join(f"{c * 1e3 / (spans * passes):.3f}" for c in timer.collections)
        + " collections a thousand spans"
    )
    return used / (spans * passes) * 1e6, timer.seconds / (spans * passes) * 1e6


class GcTimer:
    """The CPU seconds garbage collections take (a ``gc.callbacks`` entry, timed with the
    collecting thread's CPU clock), as serve counts them (``collector.gcclock``), written out
    here so that a build without that module is measured the same way."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.by_generation = [0.0] * 3  # CPU seconds: young, middle, full
        self.collections = [0] * 3
        self._began = 0.0

    def observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            took = time.thread_time() - self._began
            self.seconds += took
            self.by_generation[info["generation"]] += took
            self.collections[info["generation"]] += 1


def detect_cost(bodies: list[bytes]) -> float:
    """Microseconds of process CPU time per span for parse + assemble + detect, in process
    (CPU time, not wall clock: the machine's other work does not count), collected as serve
    and replay collect (``collected_as_served``; Python's default thresholds collect the young
    generation ~3x as often, visiting the open sessions' evidence: ~12 us a span more on the
    bench traffic)."""
    assembler = Assembler(parse({}).sessions, lambda session, reason: None)
    spans = 0
    with collected_as_served(None) as collect_if_due:
        start = time.process_time()
        for n, body in enumerate(bodies):
            spans += detect_one(assembler, n, body)
            collect_if_due()  # serve runs it on its loop, between requests
        used = time.process_time() - start
    return used / spans * 1e6


def detect_one(assembler: Assembler, n: int, body: bytes) -> int:
    """Parse request ``n`` of a pass as the chain does and assemble and detect its spans, as
    the served pipeline does; returns the spans accepted."""
    request = ParsedRequest()
    request.ParseFromString(body)
    result = Accepted()
    for _ in assembler.feed(request, n + 1, result, raw=body):
        pass
    return result.accepted


@contextlib.contextmanager
def collected_as_served(loop: asyncio.AbstractEventLoop | None) -> Iterator[Callable[[], None]]:
    """Garbage collected as serve and replay collect: ``collector.gcpolicy``'s policy, its full
    collections run on ``loop`` (without one, by the function yielded, to call between
    requests); a build from before that module, measured by this file, sets its
    ``collector.service.GC_THRESHOLDS`` instead."""
    import gc
    import importlib

    try:
        policy = importlib.import_module("collector.gcpolicy").GC_POLICY
    except ModuleNotFoundError:
        thresholds = gc.get_threshold()
        gc.set_threshold(*importlib.import_module("collector.service").GC_THRESHOLDS)
        try:
            yield lambda: None
        finally:
            gc.set_threshold(*thresholds)
        return
    if loop is None:
        policy.start(None)
    else:
        policy.start_on(loop)
    try:
        yield policy.collect_if_due
    finally:
        policy.stop()


def long_session(turns: int, salt: int = 0, wide: bool = False, held: bool = False) -> bytes:
    """One session of ``turns`` chat spans, each recording the conversation so far, as a long
    agent session does: the recorded ADK conversation repeated once per turn (each copy of a
    message marked with its turn and ``salt``, so that no two histories, of this session or
    of one with another salt, are the same text).  ``wide``: each message also holds an em
    dash, written unescaped as JSON writers outside Python do (text Python stores two bytes a
    character).  ``held``: the history is the ``contents`` of the object the recording's
    legacy ADK spans record (``LONG_TEMPLATES``)."""
    template, history_key = LONG_TEMPLATES[held]
    request = _merged(template)
    chats = [
        (rs, ss, span, kv)
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
        for kv in span.attributes
        if kv.key == history_key
    ]
    rs, ss, chat, kv = max(chats, key=lambda c: len(c[3].value.string_value))
    value = json.loads(kv.value.string_value)
    recorded = value["contents"] if held else value
    out = ExportTraceServiceRequest()
    out_rs = out.resource_spans.add()
    out_rs.resource.CopyFrom(rs.resource)
    out_ss = out_rs.scope_spans.add()
    out_ss.scope.CopyFrom(ss.scope)
    history: list[Any] = []
    for turn in range(turns):
        mark = {"turn": turn, "session": salt, **({"note": "\u2014"} if wide else {})}
        history += [{**message, **mark} for message in recorded]
        span = out_ss.spans.add()
        span.CopyFrom(chat)
        span.span_id = (turn + 1).to_bytes(8, "big")
        next(a for a in span.attributes if a.key == history_key).value.string_value = json.dumps(
            {**value, "contents": history} if held else history, ensure_ascii=not wide
        )
    body: bytes = out.SerializeToString()
    return body


def in_requests(body: bytes, limit: int) -> list[bytes]:
    """The spans of ``body`` (one resource, one scope, as ``long_session`` makes it) in order,
    packed into requests of at most ``limit`` bytes each, as an exporter sends a long session
    (a span alone over ``limit``: ValueError, as the receiver would refuse it)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    (rs,) = request.resource_spans
    (ss,) = rs.scope_spans
    out: list[bytes] = []
    current: ExportTraceServiceRequest | None = None
    size = 0
    for span in ss.spans:
        framed = span.ByteSize() + 6  # its tag and length
        if current is not None and size + framed > limit:
            out.append(current.SerializeToString())
            current = None
        if current is None:
            current = ExportTraceServiceRequest()
            out_rs = current.resource_spans.add()
            out_rs.resource.CopyFrom(rs.resource)
            out_rs.scope_spans.add().scope.CopyFrom(ss.scope)
            size = current.ByteSize() + 12  # the lengths of the resource and scope spans grow
        current.resource_spans[0].scope_spans[0].spans.add().CopyFrom(span)
        size += framed
    if current is not None:
        out.append(current.SerializeToString())
    too_large = [len(request) for request in out if len(request) > limit]
    if too_large:
        raise ValueError(f"a span alone makes a request of {too_large[0]} bytes, over {limit}")
    return out


def _session_runner(
    turns: int, sessions: int, wide: bool, held: bool, request_bytes: int | None
) -> Callable[[], float]:
    """A round of assembling and detecting ``sessions`` of ``long_session(turns)`` (each in
    a new assembler, with texts of its own): microseconds of process CPU time a span.  Each
    session comes in requests of at most ``request_bytes`` (``in_requests``; None: one
    request), each parsed, then fed, in turn, as serve takes them."""
    bodies = [
        [body] if request_bytes is None else in_requests(body, request_bytes)
        for body in (long_session(turns, salt, wide, held) for salt in range(sessions))
    ]

    def run() -> float:
        elapsed = 0.0
        for requests in bodies:
            assembler = Assembler(parse({}).sessions, lambda session, reason: None)
            for request_id, body in enumerate(requests, 1):
                request = ParsedRequest()
                request.ParseFromString(body)
                start = time.process_time()
                for _ in assembler.feed(request, request_id, Accepted(), raw=body):
                    pass
                elapsed += time.process_time() - start
        return elapsed / (turns * sessions) * 1e6

    return run


def long_session_cost(
    turns: int,
    rounds: int = 5,
    wide: bool = False,
    held: bool = False,
    request_bytes: int | None = LONG_REQUEST_BYTES,
) -> tuple[float, float, float]:
    """Microseconds of CPU time a span to assemble and detect one ``long_session(turns)``, the same
    chat spans in sessions of ``SHORT_TURNS`` (as many spans in all), and the long one with
    each history read whole (once).  Sessions come in requests of at most ``request_bytes``
    (None: each session in one request, however large: 93 MB for 300 turns, which no
    receiver takes).  The long and short rounds alternate and each figure is
    the best of its ``rounds``: the machine's drift between two phases run one after the
    other moved their quotient more than code changes did (1.08-2.37 in one day's runs)."""
    long_run = _session_runner(turns, 1, wide, held, request_bytes)
    short_run = _session_runner(SHORT_TURNS, max(1, turns // SHORT_TURNS), wide, held, request_bytes)
    long_us = short_us = float("inf")
    for _ in range(rounds):
        long_us = min(long_us, long_run())
        short_us = min(short_us, short_run())
    # Remember no history: each is read whole.
    remembered = histories_module.REMEMBERED
    histories_module.REMEMBERED = 0
    try:
        whole = long_run()
    finally:
        histories_module.REMEMBERED = remembered
    return long_us, short_us, whole


# -- clients (separate processes) ----------------------------------------------------------------


def _grpc_client(
    replica: int,
    port: int,
    bodies: list[bytes],
    seconds: float,
    warmup: float,
    interval: float,
    out: Any,
    first_round: int,
    turn: Any = None,
) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)])
    export = channel.unary_unary(EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    _drive(
        replica,
        lambda body: export(body, timeout=30),
        bodies,
        seconds,
        warmup,
        interval,
        out,
        first_round,
        turn,
        protocol="grpc",
    )


def _http_client(
    replica: int,
    port: int,
    bodies: list[bytes],
    seconds: float,
    warmup: float,
    interval: float,
    out: Any,
    first_round: int,
    turn: Any = None,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def send(body: bytes) -> None:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")

    _drive(replica, send, bodies, seconds, warmup, interval, out, first_round, turn, protocol="http")


def fresh(body: bytes | list[bytes], round_: int) -> bytes:
    """``body`` with the session and trace ids of pass ``round_`` (same lengths, so the
    protobuf stays valid).  Clients send disjoint requests; in the same pass they carry the
    same sessions.  A body already cut at its ids (``cut``) is re-keyed with one join."""
    pieces = cut(body) if isinstance(body, bytes) else body
    session, trace = f"r{round_ % 100_000:05d}".encode(), TRACE_TAG + round_.to_bytes(2, "big")
    return b"".join([session if p is SESSION_TAG else trace if p is _TRACE_MARK else p for p in pieces])


_TRACE_MARK = TRACE_TAG + bytes(2)
_IDS = re.compile(re.escape(SESSION_TAG) + b"|" + re.escape(_TRACE_MARK))


def cut(body: bytes) -> list[bytes]:
    """``body`` split around its session and trace id tags, each tag kept as the very object
    ``fresh`` looks for.  Clients share the machine with the server, so re-keying a 1 MB
    request must be cheap: two ``bytes.replace`` calls cost 3.6 us a span, a join ~0.5."""
    pieces: list[bytes] = []
    at = 0
    for match in _IDS.finditer(body):
        pieces.append(body[at : match.start()])
        pieces.append(SESSION_TAG if match.group() == SESSION_TAG else _TRACE_MARK)
        at = match.end()
    pieces.append(body[at:])
    return pieces


def _drive(
    replica: int,
    send: Any,
    bodies: list[bytes],
    seconds: float,
    warmup: float,
    interval: float,
    out: Any,
    first_round: int,
    turn: Any = None,
    protocol: str = "",
) -> None:
    """Send ``bodies`` in turn, pass after pass, each request carrying its own pass's ids
    (``fresh``).  ``turn``: the place in that sequence, shared by the clients of one replica
    (a ``multiprocessing.Value``; None: this client's own), each taking the next request
    when it is ready to send: so the parts of a session that neighbouring requests carry are
    sent close together, as in the recordings.  Clients that each walked their own share at
    their own pace drifted apart by passes within seconds, and a session's parts then came
    more than the idle timeout apart (it closed and was reopened)."""
    turn = turn if turn is not None else mp.Value("q", 0)
    counts = [span_count(b) for b in bodies]
    pieces = [cut(b) for b in bodies]
    latencies: list[float] = []
    acked: list[tuple[float, int]] = []  # (time.monotonic() at the answer, spans), warm-up too
    spans = errors = 0
    start = time.perf_counter()
    counted_from = start + warmup  # see ``drive``
    i = 0
    next_at = start
    while time.perf_counter() - start < seconds:
        if interval:
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            next_at += interval
        with turn.get_lock():
            at = turn.value
            turn.value += 1
        body = fresh(pieces[at % len(bodies)], first_round + at // len(bodies))
        t0 = time.perf_counter()
        counted = t0 >= counted_from
        try:
            send(body)
            acked.append((time.monotonic(), counts[at % len(bodies)]))
            if counted:
                spans += counts[at % len(bodies)]
                latencies.append(time.perf_counter() - t0)
        except Exception:
            errors += counted
            # Refused (backpressure): wait before the next request, as OTLP exporters do,
            # instead of re-sending megabytes the server must receive only to refuse again.
            time.sleep(REFUSED_PAUSE)
        i += 1
    out.put(
        {
            "replica": replica,
            "protocol": protocol,
            "spans": spans,
            "errors": errors,
            "latencies": latencies,
            "acked": acked,
            "elapsed": time.perf_counter() - counted_from,
        }
    )


def drive(
    servers: list[Server],
    routed: list[list[bytes]],
    seconds: float,
    clients: int,
    rates: list[float] | None = None,
    first_round: int = 0,
    warmup: float = 0.0,
) -> dict[str, Any]:
    """Run ``clients`` client processes for each replica (gRPC and HTTP in turn), each
    taking that replica's requests ``routed[n]`` in turn, pass after pass (``_drive``), and
    sending them to it; ``rates`` (requests/s
    to each replica, over its clients) None = flat out.  Each pass over the requests carries
    new sessions (see ``fresh``), numbered from ``first_round``.

    Only the last ``seconds - warmup`` seconds are counted.  Flat out, each server's bounded
    queues (``sessions.max_pending_requests``, twice 64 requests) fill in the first seconds:
    counted from the start, the acknowledgements that filled them would add up to ~65k spans
    never processed within the phase.  Counted once they are full, acknowledgements keep
    pace with processing."""
    queue: Any = mp.Queue()
    procs = []
    for replica, (server, bodies) in enumerate(zip(servers, routed, strict=True)):
        interval = clients / rates[replica] if rates else 0.0
        turn = mp.Value("q", 0)  # the replica's next request, taken by whichever client is free
        for n in range(clients):
            target, port = (
                (_grpc_client, server.grpc_port) if n % 2 == 0 else (_http_client, server.http_port)
            )
            args = (replica, port, bodies, seconds, warmup, interval, queue, first_round, turn)
            procs.append(mp.Process(target=target, args=args))
    for p in procs:
        p.start()
    results = [queue.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    latencies = sorted(x for r in results for x in r["latencies"])  # acknowledged requests only
    elapsed = max(r["elapsed"] for r in results)
    by_replica = [[r for r in results if r["replica"] == n] for n in range(len(servers))]
    return {
        "spans_per_s": sum(r["spans"] for r in results) / elapsed,
        "replica_spans_per_s": [sum(r["spans"] for r in rs) / elapsed for rs in by_replica],
        "requests_per_s": (len(latencies) + sum(r["errors"] for r in results)) / elapsed,
        "ok_requests_per_s": len(latencies) / elapsed,
        "replica_ok_requests_per_s": [sum(len(r["latencies"]) for r in rs) / elapsed for rs in by_replica],
        "errors": sum(r["errors"] for r in results),
        # Every acknowledgement, warm-up too: (time, spans, replica).
        "acked": [(t, n, r["replica"]) for r in results for t, n in r["acked"]],
        **_percentiles("", latencies),
        # By protocol: the clients of each replica are half gRPC, half HTTP.
        **{
            key: value
            for protocol in ("grpc", "http")
            for key, value in _percentiles(
                f"{protocol}_",
                sorted(x for r in results if r["protocol"] == protocol for x in r["latencies"]),
            ).items()
        },
    }


def _percentiles(prefix: str, latencies: list[float]) -> dict[str, float]:
    """The p50 and p99 in ms of ``latencies`` (sorted, seconds), keyed ``<prefix>p50_ms``..."""
    if not latencies:
        return {f"{prefix}p50_ms": 0.0, f"{prefix}p99_ms": 0.0}
    return {
        f"{prefix}p50_ms": 1000 * latencies[len(latencies) // 2],
        f"{prefix}p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def settle(servers: list[Server], quiet: float) -> None:
    """Let the saturation phase's backlog clear before measuring latency at half load: its
    sessions close (idle timeout) and the spool deletes their requests (checkpoint every 5 s),
    a burst that steady traffic at half load would not have."""
    deadline = time.monotonic() + 120
    for server in servers:
        while time.monotonic() < deadline:
            _, status = server.get_json("/readyz")
            if status.get("open_sessions", 0) == 0:
                break
            time.sleep(0.5)
    time.sleep(quiet)


@contextlib.contextmanager
def replicas(tmp: Path, count: int, extra: dict[str, Any]) -> Iterator[list[Server]]:
    """``count`` ``skillgauge serve`` processes, each with its own data dir under ``tmp`` and
    its own ports (port 0, read back from its startup line), started together."""
    servers: list[Server] = []
    try:
        for n in range(count):
            (tmp / f"replica-{n}").mkdir()
            servers.append(Server(tmp / f"replica-{n}", extra, wait=False))
        for server in servers:
            server.wait_ready(timeout=60)
        yield servers
    finally:
        for server in servers:
            server.stop()


def rss_bytes(pid: int) -> int:
    """Resident bytes of a process and its child processes, if any."""
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total += int(line.split()[1]) * 1024
    return total + sum(rss_bytes(child) for child in children(pid))


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, all its threads, with its child
    processes': the live ones' (recursively) and the reaped ones' (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(child) for child in children(pid))


def children(pid: int) -> list[int]:
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]


def thread_seconds(pid: int) -> dict[str, float]:
    """CPU time (user + system) each thread of a process has used so far
    (``/proc/<pid>/task/*/stat``): ``loop`` for the main thread (serve's event loop), else
    ``thread <tid>`` (Python gives the kernel no thread names)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = "loop" if int(task.name) == pid else f"thread {task.name}"
            out[name] = sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    return out


def gc_seconds(server: Server) -> list[float]:
    """CPU seconds, collections and objects found unreachable so far in a replica's garbage
    collections, each by generation (young, middle, full: nine values;
    ``skillgauge_gc_cpu_seconds_total``, ``skillgauge_gc_collections_total``,
    ``skillgauge_gc_collected_objects_total``); NaNs for what a build does not count."""
    text = server.metrics()
    return [
        metric_value(text, f"skillgauge_gc_{name}_total", generation=str(g))
        if f"skillgauge_gc_{name}_total" in text
        else float("nan")
        for name in ("cpu_seconds", "collections", "collected_objects")
        for g in range(3)
    ]


def pending_requests(server: Server) -> float:
    """Acknowledged trace requests waiting in a replica's assembler queue now."""
    return metric_value(server.metrics(), "skillgauge_pending_requests", stage="assembler")


def print_gc_totals(servers: list[Server]) -> None:
    """Each replica's garbage collections since it started, by generation: how many, their mean
    pause (CPU) and the objects they found unreachable (a full collection visits the whole heap:
    rare, but the longest pause)."""
    for n, server in enumerate(servers):
        seconds, collections, found = (gc_seconds(server)[k : k + 3] for k in (0, 3, 6))
        print(
            f"  replica {n} garbage collections since start (young, middle, full): "
            + ", ".join(f"{c:.0f}" for c in collections)
            + "; mean CPU each "
            + ", ".join(f"{s / c * 1e3:.2f}" if c else "-" for s, c in zip(seconds, collections, strict=True))
            + " ms; objects found unreachable "
            + ", ".join(f"{f:.0f}" for f in found)
        )


class CpuWindow:
    """CPU each replica process (all its threads, with its children) uses between ``warmup``
    seconds from now and ``seconds`` (the counted part of a ``drive``), measured from
    ``/proc`` on a thread; each thread's share of it, by thread name; and the part of it the
    replicas spent collecting garbage (``gc``, cores, in whichever thread collected).  The
    replicas' CPU is also read at the ends of ``parts`` equal windows of it (``marks``: the
    ``time.monotonic()`` of each reading, ``samples``: every replica's CPU seconds so far), and
    the requests waiting in each replica's assembler queue (``pending``), so that the CPU a span
    can be had for each window (``windows``)."""

    def __init__(self, servers: list[Server], warmup: float, seconds: float, parts: int = 1) -> None:
        self.parts = parts
        self.marks: list[float] = []
        self.samples: list[float] = []
        self.pending: list[list[float]] = []
        self.servers = servers
        self.pids = {f"replica {n}": server.proc.pid for n, server in enumerate(servers)}
        self.used: dict[str, float] = {}  # cores: CPU seconds a second
        self.threads: dict[str, float] = {}  # cores by thread name, over every replica
        self.gc = 0.0  # cores, over every replica
        self.gc_by_generation = [0.0] * 9  # cores, collections, objects found, a second: young/middle/full
        self._thread = threading.Thread(target=self._measure, args=(warmup, seconds), daemon=True)
        self._thread.start()

    def _measure(self, warmup: float, seconds: float) -> None:
        time.sleep(warmup)
        before, start = {n: cpu_seconds(p) for n, p in self.pids.items()}, time.monotonic()
        self.marks.append(start)
        self.samples.append(sum(before.values()))
        self.pending.append([pending_requests(server) for server in self.servers])
        threads_before = {n: thread_seconds(p) for n, p in self.pids.items()}
        gc_before = [gc_seconds(server) for server in self.servers]
        length = (seconds - warmup - 0.5) / self.parts  # inside the phase
        for part in range(1, self.parts + 1):
            time.sleep(max(0.0, start + part * length - time.monotonic()))
            self.marks.append(time.monotonic())
            self.samples.append(sum(cpu_seconds(p) for p in self.pids.values()))
            self.pending.append([pending_requests(server) for server in self.servers])
        elapsed = time.monotonic() - start
        gc_after = [gc_seconds(server) for server in self.servers]
        self.gc_by_generation = [
            sum(after[k] - before[k] for before, after in zip(gc_before, gc_after, strict=True)) / elapsed
            for k in range(9)
        ]
        self.gc = sum(self.gc_by_generation[:3])
        self.used = {n: (cpu_seconds(p) - before[n]) / elapsed for n, p in self.pids.items()}
        for n, p in self.pids.items():
            for name, used in thread_seconds(p).items():
                key = name if name == "loop" else f"{n} {name}"
                self.threads[key] = (
                    self.threads.get(key, 0.0) + (used - threads_before[n].get(name, 0.0)) / elapsed
                )

    def windows(self, acked: list[tuple[float, int, int]], request_spans: list[float]) -> list[float]:
        """Microseconds of every replica's CPU a span they took in, in each window: the spans
        acknowledged in it (``acked``: each acknowledgement's time, spans and replica) less those
        it left waiting in the assembler's queue beyond what waited when it began (requests,
        at ``request_spans`` spans each: that replica's mean).  Acknowledgements run ahead of
        assembly by up to a full queue (seconds of a replica's work), so over a few seconds the
        spans acknowledged alone are not what the CPU was spent on."""
        self._thread.join()
        out = []
        for k in range(len(self.marks) - 1):
            spans = sum(n for t, n, _ in acked if self.marks[k] <= t < self.marks[k + 1]) - sum(
                (after - before) * size
                for before, after, size in zip(
                    self.pending[k], self.pending[k + 1], request_spans, strict=True
                )
            )
            used = self.samples[k + 1] - self.samples[k]
            out.append(used / spans * 1e6 if spans > 0 else float("nan"))
        return out

    def per_span(self, spans_per_s: list[float]) -> dict[str, float]:
        """Microseconds of each replica's CPU a span it acknowledged."""
        self._thread.join()
        used = self.used.items()
        return {
            n: c / rate * 1e6 if rate else float("nan")
            for (n, c), rate in zip(used, spans_per_s, strict=True)
        }


def saturate(
    servers: list[Server], routed: list[list[bytes]], seconds: float, clients: int, warmup: float, parts: int
) -> tuple[dict[str, Any], dict[str, float], float, list[float]]:
    """Clients flat out; prints the figures, returns them with each replica's CPU a span, the
    CPU a span over every replica (their CPU time over the spans they acknowledged in the
    counted part) and that figure in each of ``parts`` equal windows of the counted part (their
    median is ``flat["served_median_us"]``)."""
    window = CpuWindow(servers, warmup, seconds, parts)
    flat = drive(servers, routed, seconds, clients, warmup=warmup)
    print(
        f"ingest, {len(servers)} replica{'s' if len(servers) > 1 else ''} x {clients} clients (gRPC + HTTP), "
        "durable spool: "
        f"{flat['spans_per_s']:,.0f} spans/s in all, {flat['requests_per_s']:.1f} req/s, "
        f"p50 {flat['p50_ms']:.1f} ms, p99 {flat['p99_ms']:.1f} ms, refused with backpressure {flat['errors']}"
    )
    rates = flat["replica_spans_per_s"]
    print(
        f"  per replica: {', '.join(f'{r:,.0f}' for r in rates)} spans/s (mean {sum(rates) / len(rates):,.0f})"
    )
    cpu = window.per_span(rates)
    print(
        "  CPU at saturation: "
        + ", ".join(f"{n} {c:.2f} cores, {cpu[n]:.1f} us a span" for n, c in window.used.items())
    )
    total = sum(rates)
    whole = sum(window.used.values()) / total * 1e6 if total else float("nan")
    request_spans = [sum(span_count(b) for b in bodies) / len(bodies) for bodies in routed]
    windows = window.windows(flat["acked"], request_spans)
    counted = [w for w in windows if w == w]  # a window without an acknowledgement has no figure
    served = statistics.median(counted) if counted else float("nan")
    print(
        f"  CPU a span served, all replicas, in {len(windows)} windows of the counted part: "
        + ", ".join(f"{w:.1f}" for w in windows)
        + f" us (median {served:.1f}, spread {max(counted, default=served) - min(counted, default=served):.1f}); "
        f"over the whole part "
        f"{whole:.1f} us; by thread: "
        + ", ".join(
            f"{name} {used / total * 1e6:.1f} us"
            for name, used in sorted(window.threads.items(), key=lambda t: -t[1])
            if used / total * 1e6 >= 0.5
        )
        + f"; of it collecting garbage (any thread) {window.gc / total * 1e6 if total else float('nan'):.1f} us"
    )
    if total:
        by = window.gc_by_generation
        print(
            "  garbage collection by generation (young, middle, full): "
            + ", ".join(f"{s / total * 1e6:.2f}" for s in by[:3])
            + " us a span; "
            + ", ".join(f"{c * 1e3 / total:.3f}" for c in by[3:6])
            + " collections and "
            + ", ".join(f"{c * 1e3 / total:.3f}" for c in by[6:])
            + " objects found unreachable a thousand spans"
        )
    flat["served_median_us"] = served
    return flat, {n: round(us, 1) for n, us in cpu.items()}, whole, windows


def open_session_memory(
    tmp: Path, sessions: int, spans_per_session: int, replica_count: int
) -> tuple[float, float]:
    """(RSS bytes per open session, raw span bytes per session): the sessions routed over the
    replicas, each replica's RSS growth summed."""
    bodies, _ = requests_for(sessions, spans_per_session=spans_per_session)
    raw = sum(len(b) for b in bodies) / sessions
    routed, owned = route(bodies, replica_count)
    warm_up, _ = requests_for(1, spans_per_session=spans_per_session)
    with replicas(tmp, replica_count, {"sessions": {"idle_timeout": "1h"}}) as servers:
        exports = []
        for server in servers:
            channel = grpc.insecure_channel(
                f"127.0.0.1:{server.grpc_port}", options=[("grpc.max_send_message_length", 64 << 20)]
            )
            exports.append(
                channel.unary_unary(EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b)
            )
        # One session first, answered for: every module detection imports is loaded (in any
        # child process too) before the baseline is read.
        for server, export in zip(servers, exports, strict=True):
            export(fresh(warm_up[0], 9_999), timeout=60)
            code, _ = server.get_json(f"/v1/sessions/r09999{0:07d}")
            assert code == 200, code
        before = [rss_bytes(server.proc.pid) for server in servers]

        def send(export: Any, requests: list[bytes]) -> None:
            for body in requests:
                while True:
                    try:
                        export(body, timeout=60)
                        break
                    except grpc.RpcError as err:  # backpressure: retry as an exporter would
                        if err.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        time.sleep(REFUSED_PAUSE)

        with ThreadPoolExecutor(len(servers)) as pool:
            sending = [pool.submit(send, export, rb) for export, rb in zip(exports, routed, strict=True)]
            for sent in sending:
                sent.result()
        # Acknowledged means spooled; assembly follows: wait until every session is open.
        deadline = time.monotonic() + 120
        for server, names in zip(servers, owned, strict=True):
            while True:
                _, status = server.get_json("/readyz")
                if status.get("open_sessions", 0) >= len(names) * 0.99 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert status.get("open_sessions", 0) >= len(names) * 0.99, (status, len(names))
            # An open session's status is answered once everything sent before it is detected.
            code, _ = server.get_json(f"/v1/sessions/{names[-1]}")
            assert code == 200, code
        after = [rss_bytes(server.proc.pid) for server in servers]
    return (sum(after) - sum(before)) / sessions, raw


# -- evaluation lag and judge tokens (fake judge, downstream receiver) -------------------------


class _UsageLedger(FakeAnthropic):
    """The fake Anthropic server, adding up the usage it reports."""

    def __init__(self) -> None:
        super().__init__(min_cache_tokens=MIN_CACHE_TOKENS)
        self.usage: dict[str, int] = {}

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        usage: dict[str, int] = super()._usage(body, content)
        with self._lock:
            for kind, n in usage.items():
                self.usage[kind] = self.usage.get(kind, 0) + n
        return usage


class _ArrivalClock(Downstream):
    """The downstream receiver, noting when each session's evaluation spans arrive."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}  # session id -> last evaluation span seen
        self.evaluation_spans = 0
        super().__init__("grpc")

    def _grpc_traces(self, request: ExportTraceServiceRequest, context: Any) -> Any:
        now = time.monotonic()
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    session = next(
                        (kv.value.string_value for kv in span.attributes if kv.key == "session.id"), ""
                    )
                    with self._lock:
                        self.arrivals[session] = now
                        self.evaluation_spans += 1
        return super()._grpc_traces(request, context)


def one_skill_sessions(sessions: int) -> list[tuple[str, bytes]]:
    """(session id, request) pairs: one recorded session of one skill, re-keyed, its last span
    carrying the end attribute so that the session closes when the request is acknowledged."""
    request = _merged(ONE_SKILL)
    out = []
    for n in range(sessions):
        name = f"lag-{n:06d}"
        copy = ExportTraceServiceRequest()
        copy.CopyFrom(request)
        last: Span | None = None
        for rs in copy.resource_spans:
            for kv in rs.resource.attributes:
                if is_session_key(kv.key):
                    kv.value.string_value = name
            for ss in rs.scope_spans:
                for span in ss.spans:
                    rekey(span, name, n + 1)
                    if not any(is_session_key(kv.key) for kv in span.attributes):
                        kv = span.attributes.add()
                        kv.key, kv.value.string_value = "session.id", name
                    if last is None or span.end_time_unix_nano >= last.end_time_unix_nano:
                        last = span
        assert last is not None
        end = last.attributes.add()
        end.key, end.value.bool_value = END_ATTRIBUTE, True
        out.append((name, copy.SerializeToString()))
    return out


def _merged(path: Path) -> ExportTraceServiceRequest:
    merged = ExportTraceServiceRequest()
    for request in trace_requests(path):
        merged.resource_spans.extend(request.resource_spans)
    return merged


def judged_sessions(tmp: Path, sessions: int, rate: float) -> dict[str, float]:
    """Send ``sessions`` sessions at ``rate``/s to one server (one replica) with a judge and an
    exporter; the p95 of close -> exported, and the judge's billed input tokens with and
    without caching."""
    judge = _UsageLedger().start()
    downstream = _ArrivalClock()
    server = Server(
        tmp,
        {
            "sessions": {"idle_timeout": "1h"},
            "judge": {"base_url": judge.base_url, "api_key": "bench", "max_concurrency": 16},
            "export": {"otlp": {"endpoint": downstream.endpoint, "retry": {"initial_interval": "0.1s"}}},
        },
    )
    acked: dict[str, float] = {}
    try:
        requests = one_skill_sessions(sessions)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        export = channel.unary_unary(
            EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        start = time.monotonic()
        for i, (name, body) in enumerate(requests):
            pause = start + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            export(body, timeout=30)
            acked[name] = time.monotonic()
        sent_rate = sessions / (time.monotonic() - start)
        # Settled: every session has results downstream and nothing new arrived for a second.
        deadline, seen = time.monotonic() + 120, -1
        while time.monotonic() < deadline:
            time.sleep(1.0)
            with downstream._lock:
                count, done = downstream.evaluation_spans, len(acked.keys() & downstream.arrivals.keys())
            if done == sessions and count == seen:
                break
            seen = count
        channel.close()
    finally:
        server.stop()
        downstream.stop()
        judge.stop()
    lags = sorted(downstream.arrivals[name] - at for name, at in acked.items() if name in downstream.arrivals)
    usage = judge.usage
    plain = usage.get("input_tokens", 0)
    write, read = usage.get("cache_creation_input_tokens", 0), usage.get("cache_read_input_tokens", 0)
    uncached = plain + write + read  # the same requests without cache_control: all plain input
    billed = plain + CACHE_WRITE_PRICE * write + CACHE_READ_PRICE * read
    return {
        "sessions": sessions,
        "sent_per_s": sent_rate,
        "exported_sessions": len(lags),
        "lag_p50_s": lags[len(lags) // 2] if lags else float("nan"),
        "lag_p95_s": lags[min(len(lags) - 1, int(len(lags) * 0.95))] if lags else float("nan"),
        "judge_requests": len(judge.requests),
        "input_tokens": plain,
        "cache_write_tokens": write,
        "cache_read_tokens": read,
        "tokens_ratio": billed / uncached if uncached else float("nan"),
    }


# -- main ------------------------------------------------------------------------------------------


def half_load(
    servers: list[Server],
    routed: list[list[bytes]],
    flat: dict[str, Any],
    seconds: float,
    clients: int,
    warmup: float,
    short: bool,
    fixed_rate: float | None = None,
) -> dict[str, Any]:
    """Once the saturation phase's sessions have closed, each replica driven at half the
    requests/s it acknowledged flat out (or at ``fixed_rate`` requests/s in all, shared
    evenly: two builds compared at one rate): the acknowledgements' latencies."""
    settle(servers, 1.0 if short else 10.0)
    if fixed_rate is not None:
        rates = [fixed_rate / len(servers)] * len(servers)
    else:
        rates = [r / 2 for r in flat["replica_ok_requests_per_s"]]
    assert all(rates), f"a replica acknowledged nothing at saturation: {rates}"
    before = [gc_seconds(server) for server in servers]
    half = drive(servers, routed, seconds, clients, rates=rates, first_round=10_000, warmup=warmup)
    # A full collection pauses its replica's loop (hundreds of ms on a served heap): every
    # acknowledgement due meanwhile waits, so the p99 is read beside how many fell in the phase.
    after = [gc_seconds(server) for server in servers]
    fulls = [(last[5] - first[5], last[2] - first[2]) for first, last in zip(before, after, strict=True)]
    half["full_collections"] = sum(count for count, _ in fulls)
    print(
        f"at {'a fixed rate' if fixed_rate is not None else '50% load'} ({sum(rates):.1f} req/s in all: "
        f"{', '.join(f'{r:.1f}' for r in rates)} per replica): p50 {half['p50_ms']:.1f} ms, "
        f"p99 {half['p99_ms']:.1f} ms, refused {half['errors']}; gRPC p50 {half['grpc_p50_ms']:.1f} / "
        f"p99 {half['grpc_p99_ms']:.1f} ms, HTTP p50 {half['http_p50_ms']:.1f} / p99 {half['http_p99_ms']:.1f} ms; "
        "full collections in the phase (warm-up included), by replica: "
        + ", ".join(f"{count:.0f} ({pause * 1e3:.0f} ms of CPU)" for count, pause in fulls)
    )
    return half


def _latency_figures(half: dict[str, Any]) -> dict[str, float]:
    """The half-load acknowledgements' p50 in all and p50 / p99 by protocol, in ms, and the full
    collections the replicas ran meanwhile (``export_full_collections``)."""
    keys = ("p50_ms", "grpc_p50_ms", "grpc_p99_ms", "http_p50_ms", "http_p99_ms", "full_collections")
    return {f"export_{key}": round(half[key], 1) for key in keys}


def cpu_figures(
    paired: Paired, served_us: float, inprocess_us: float, windows: list[float], median_us: float
) -> dict[str, Any]:
    """The CPU figures (microseconds of process CPU time a span) and their ratios; beside the
    served figure (the whole counted part), each window's and their median; beside detection
    over decode, each round's (``decode_and_detect``)."""
    decode_us, detect_us = paired.decode_us, paired.detect_us
    figures = {
        "decode_cpu_us_per_span": round(decode_us, 2),
        "served_cpu_us_per_span": round(served_us, 1),
        "served_cpu_us_per_span_windows": [round(w, 1) if w == w else None for w in windows],
        "served_cpu_us_per_span_median": round(median_us, 1),
        "inprocess_cpu_us_per_span": round(inprocess_us, 1),
        "detect_cpu_us_per_span": round(detect_us, 1),
        "served_over_decode": round(served_us / decode_us, 2),
        "served_over_inprocess": round(served_us / inprocess_us, 3),
        "detect_over_decode": round(detect_us / decode_us, 2),
        "detect_over_decode_rounds": [round(r, 2) for r in paired.ratios],
    }
    print(
        f"CPU a span: decode {decode_us:.2f} us, served {served_us:.1f} us, in process {inprocess_us:.1f} us, "
        f"detect {detect_us:.1f} us; served / decode {figures['served_over_decode']:.2f}, "
        f"served / in process {figures['served_over_inprocess']:.3f}, detect / decode "
        f"{figures['detect_over_decode']:.2f}"
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--short", action="store_true", help="a quick run (CI): small traffic, short phases")
    args.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help="skillgauge serve replicas for the served figures (default: one a core, "
        f"{os.cpu_count()} here; 2 with --short)",
    )
    args.add_argument(
        "--ingest-only",
        action="store_true",
        help="the CPU figures, the saturation phase and the half-load latency only (to compare two "
        "builds run in turn)",
    )
    args.add_argument(
        "--half-load-rate",
        type=float,
        default=None,
        metavar="R",
        help="drive the latency phase at R requests/s in all instead of half the rate acknowledged "
        "flat out (to compare two builds' latency at one rate)",
    )
    args.add_argument(
        "--write-traffic",
        metavar="DIR",
        help="write the traffic (three passes, fresh ids each) to DIR as .binpb files and stop: "
        "`skillgauge replay DIR` then runs the whole chain on it in one process",
    )
    args.add_argument(
        "--shared",
        metavar="URL",
        help="storage.shared of every replica (postgresql://...): the shared tables in that database",
    )
    opts = args.parse_args(argv)
    short = opts.short
    replica_count = opts.replicas if opts.replicas is not None else 2 if short else os.cpu_count() or 1
    if replica_count < 1:
        args.error("--replicas must be at least 1")
    seconds, warmup = (4.0, 1.0) if short else (25.0, 5.0)  # counted: the last 3 or 20 s
    parts = 3 if short else 5  # windows of the counted part: the served CPU figure is their median
    clients = 2 if short else 4  # for each replica
    open_sessions = 500 if short else 10_000
    judged_count = 100 if short else 1000

    print(
        f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, pid {os.getpid()}; "
        f"replicas: {replica_count}"
    )
    bodies, spans = requests_for(200 if short else 2000)
    mean_span = sum(len(b) for b in bodies) / spans
    print(f"traffic: {len(bodies)} requests, {spans} spans, {mean_span:.0f} bytes/span on the wire")
    if opts.write_traffic:
        out = Path(opts.write_traffic)
        out.mkdir(parents=True, exist_ok=True)
        for round_ in range(1, 4):
            for n, body in enumerate(bodies):
                (out / f"{round_:02d}-{n:04d}.binpb").write_bytes(fresh(body, round_))
        print(f"wrote {3 * len(bodies)} requests ({3 * spans} spans) to {out}")
        return 0
    routed, owned = route(bodies, replica_count)
    print(
        f"routed by {ROUTING_ATTRIBUTE} on the loadbalancing exporter's ring: "
        + "; ".join(
            f"replica {n} {len(names)} sessions, {sum(span_count(b) for b in rb)} spans in {len(rb)} requests"
            for n, (names, rb) in enumerate(zip(owned, routed, strict=True))
        )
    )
    served: dict[str, Any] = {"sessions": {"idle_timeout": "2s"}}
    if opts.shared:
        served["storage"] = {"shared": opts.shared}

    paired = decode_and_detect(bodies, spans, 1 if short else 5)
    limit, decode_us, detect_us = paired.limit, paired.decode_us, paired.detect_us
    print(
        f"decode limit (parse + attribute values, 1 core): {limit:,.0f} spans/s; CPU {decode_us:.2f} us a span"
    )
    print(
        f"parse + assemble + detect in process: CPU {detect_us:.1f} us a span; detect / decode "
        f"{detect_us / decode_us:.2f}, "
        f"in each round: {', '.join(f'{r:.2f}' for r in paired.ratios)}"
    )
    passes = 1 if short else 3
    inprocess_us, inprocess_gc_us = inprocess_cpu(bodies, spans, passes, served)
    print(
        f"the same traffic through replay's chain in process ({passes} passes): CPU {inprocess_us:.1f} us a span; "
        f"of it collecting garbage {inprocess_gc_us:.1f} us"
    )

    if opts.ingest_only:
        with tempfile.TemporaryDirectory() as tmp, replicas(Path(tmp), replica_count, served) as servers:
            flat, cpu, served_us, windows = saturate(servers, routed, seconds, clients, warmup, parts)
            half = half_load(servers, routed, flat, seconds, clients, warmup, short, opts.half_load_rate)
            print_gc_totals(servers)
        print(
            json.dumps(
                {
                    "replicas": replica_count,
                    "ingest_spans_per_s": round(flat["spans_per_s"]),
                    "replica_spans_per_s": [round(r) for r in flat["replica_spans_per_s"]],
                    "cpu_us_per_span": cpu,
                    **cpu_figures(paired, served_us, inprocess_us, windows, flat["served_median_us"]),
                    "export_p99_ms": round(half["p99_ms"], 1),
                    **_latency_figures(half),
                    "short": short,
                }
            )
        )
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ingest").mkdir()
        with replicas(Path(tmp) / "ingest", replica_count, served) as servers:
            flat, cpu, served_us, windows = saturate(servers, routed, seconds, clients, warmup, parts)
            print(f"  ratio (ingest in all / decode limit of one core): {flat['spans_per_s'] / limit:.3f}")
            half = half_load(servers, routed, flat, seconds, clients, warmup, short, opts.half_load_rate)
            print_gc_totals(servers)
        # The long sessions after the served phase, as ``--ingest-only`` has none before it: what
        # they leave in this process (the clients are forked from it) must not weigh on it.
        turns = 50 if short else 300
        # Beside it, the same chat spans in short sessions, as many spans in all: what a span
        # costs when the conversation before it is short.
        long_us, short_us, long_whole_us = long_session_cost(turns)
        print(
            f"a long session ({turns} chat spans, each recording the conversation so far, in requests of "
            f"at most {LONG_REQUEST_BYTES // 1024**2} MiB): {long_us:.1f} us/span; reading every history whole: "
            f"{long_whole_us:.1f} us/span; the same spans in sessions of {SHORT_TURNS}: {short_us:.1f} us/span "
            f"(long / short: {long_us / short_us:.2f})"
        )
        wide_long_us, wide_short_us, _ = long_session_cost(turns, wide=True)
        print(
            f"  the same with text that is not ASCII (an em dash in every message): long "
            f"{wide_long_us:.1f} us/span, short {wide_short_us:.1f} us/span "
            f"(long / short: {wide_long_us / wide_short_us:.2f})"
        )
        held_long_us, held_short_us, _ = long_session_cost(turns, held=True)
        print(
            f"  the same with the history held in an object (model, config, contents): long "
            f"{held_long_us:.1f} us/span, short {held_short_us:.1f} us/span "
            f"(long / short: {held_long_us / held_short_us:.2f})"
        )
        # The figure measured before: each session in one request, the long one of 93 MB at 300
        # turns (over any receiver's limit), its bytes parsed long before its last spans are read.
        one = {held: long_session_cost(turns, held=held, request_bytes=None)[:2] for held in (False, True)}
        print(
            "  each session in one request (over any receiver's limit; the figure measured before): "
            + ", ".join(
                f"{name} long {one[held][0]:.1f} us/span, short {one[held][1]:.1f} us/span "
                f"(long / short: {one[held][0] / one[held][1]:.2f})"
                for name, held in (("plain", False), ("held", True))
            )
        )
        (Path(tmp) / "memory").mkdir()
        per_session, raw = open_session_memory(Path(tmp) / "memory", open_sessions, 50, replica_count)
        print(
            f"open sessions: {open_sessions} x 50 spans over {replica_count} replicas: "
            f"{per_session:,.0f} RSS bytes/session (raw spans {raw:,.0f} bytes; target <= {1.5 * raw + 4096:,.0f})"
        )
        (Path(tmp) / "judged").mkdir()
        judged = judged_sessions(Path(tmp) / "judged", judged_count, 100.0)
        print(
            f"judged sessions (one replica): {judged['sessions']} of one skill at {judged['sent_per_s']:.0f}/s, "
            f"{judged['exported_sessions']} exported: close -> exported p50 {judged['lag_p50_s']:.2f} s, "
            f"p95 {judged['lag_p95_s']:.2f} s"
        )
        print(
            f"judge: {judged['judge_requests']} requests; input tokens {judged['input_tokens']:,}, "
            f"cache writes {judged['cache_write_tokens']:,}, cache reads {judged['cache_read_tokens']:,}; "
            f"billed with caching / without: {judged['tokens_ratio']:.3f}"
        )

    figures = {
        "replicas": replica_count,
        "ingest_spans_per_s": round(flat["spans_per_s"]),  # the machine's: summed over replicas
        "replica_spans_per_s": [round(r) for r in flat["replica_spans_per_s"]],
        "decode_limit_spans_per_s": round(limit),
        "ratio": round(flat["spans_per_s"] / limit, 3),
        "export_p99_ms": round(half["p99_ms"], 1),
        **_latency_figures(half),
        "rss_bytes_per_open_session": round(per_session),
        "raw_bytes_per_open_session": round(raw),
        "detect_us_per_span": round(detect_us, 2),
        "cpu_us_per_span": cpu,  # at saturation, by replica process
        **cpu_figures(paired, served_us, inprocess_us, windows, flat["served_median_us"]),
        "long_session_detect_us_per_span": round(long_us, 1),
        "short_session_detect_us_per_span": round(short_us, 1),
        "long_session_wide_detect_us_per_span": round(wide_long_us, 1),
        "short_session_wide_detect_us_per_span": round(wide_short_us, 1),
        "long_session_held_detect_us_per_span": round(held_long_us, 1),
        "short_session_held_detect_us_per_span": round(held_short_us, 1),
        "long_session_one_request_detect_us_per_span": round(one[False][0], 1),
        "short_session_one_request_detect_us_per_span": round(one[False][1], 1),
        "long_session_held_one_request_detect_us_per_span": round(one[True][0], 1),
        "short_session_held_one_request_detect_us_per_span": round(one[True][1], 1),
        "eval_lag_p95_s": round(judged["lag_p95_s"], 3),
        "judge_input_tokens_ratio": round(judged["tokens_ratio"], 3),
        "short": short,
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
