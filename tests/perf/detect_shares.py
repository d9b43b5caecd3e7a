"""Where detection's CPU goes: each detector's and reader's share of ``bench.detect_cost``.

    python tests/perf/detect_shares.py [--sessions 2000] [--rounds 3] [--by-kind]

Runs ``bench.detect_cost`` over the benchmark's traffic with a timer around each stage of
placing and observing a span (the reader or detector named), and prints, per stage, its
calls a span and microseconds a span (inclusive: a stage's time holds what it calls, so the
shares overlap where stages nest, e.g. ``_scan`` within ``_observe_tool``).  The timers read
the thread's CPU time (a system call, ~0.5 us a reading, part of each figure): read the
shares against one another, not the sum against the first line.  The first line is
``detect_cost`` without timers (CPU time, best of ``--rounds``).  ``--by-kind`` also prints
``observe_span``'s microseconds per span kind (the span's name), the costliest first.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import bench  # noqa: E402

from collector.detect import content, histories, intake, messages, readings  # noqa: E402
from collector.detect import session as session_module  # noqa: E402
from collector.otlp import views  # noqa: E402
from collector.sessions import assembler, binding  # noqa: E402

_TOTALS: dict[str, list[int]] = {}


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.thread_time_ns  # CPU time: a busy machine's waits do not count
    total = _TOTALS.setdefault(name, [0, 0])

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            total[0] += clock() - start
            total[1] += 1

    return wrapper


# (owner, attribute, label): what each stage is.
STAGES: list[tuple[Any, str, str]] = [
    (assembler.Assembler, "_place", "place: key, session, counts"),
    (assembler.Assembler, "_join", "joined: counted in its session (runs; within place)"),
    (binding.Binding, "_key_and_source", "  session key (configured, by shape)"),
    (binding.Binding, "_session_for", "  session for the key"),
    (views.Attributes, "shape", "attribute keys read (the key shape), any stage"),
    (session_module.SessionEvidence, "observe_span", "observe_span (every detector)"),
    (intake.Intake, "_name_framework", "  framework"),
    (session_module, "tool_call", "  tool call read (content.tool_call)"),
    (session_module, "shaped_call", "  tool call read by key shape (content.shaped_call)"),
    (intake.Intake, "_observe_tool", "  tool detectors (load_of) and catalog tools"),
    (session_module.SessionEvidence, "_tool_description", "  tool description catalog"),
    (messages, "span_fields", "  prompt fields and answers (messages.span_fields)"),
    (messages, "other_prompt_texts", "  keys no table names (prompts)"),
    (messages, "input_texts", "  keys no table names (inputs)"),
    (messages, "tool_definitions", "  tool definitions"),
    (histories.Histories, "unread_part", "  history: unread part"),
    (messages, "user_texts", "  user turns: texts"),
    (intake.Intake, "_new_request", "  user turns: request, injected located"),
    (intake.Intake, "_scan", "  prompt text scanned (what its markers allow)"),
    (readings, "contents", "    decoded and walked (readings.contents)"),
    (readings.Contents, "catalogs", "    catalogs each string lists (kept per text)"),
    (intake.Intake, "_catalog_in", "    catalog shapes (a tool's text, a registry)"),
    (messages, "flattened_blocks", "  flattened message blocks"),
    (content, "parse_json", "  (JSON parses, any stage)"),
]


def shares(bodies: list[bytes], spans: int) -> list[tuple[str, float, float]]:
    """(stage, calls a span, us a span) of one timed ``detect_cost`` run."""
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute, _ in STAGES]
    _TOTALS.clear()
    try:
        for owner, attribute, label in STAGES:
            setattr(owner, attribute, _timed(label, getattr(owner, attribute)))
        bench.detect_cost(bodies)
    finally:
        for owner, attribute, original in saved:
            setattr(owner, attribute, original)
    return [(label, _TOTALS[label][1] / spans, _TOTALS[label][0] / 1e3 / spans) for _, _, label in STAGES]


def by_kind(bodies: list[bytes]) -> list[tuple[str, int, float]]:
    """(span name, spans, us each) of ``observe_span`` in one timed ``detect_cost`` run."""
    clock = time.thread_time_ns
    original = session_module.SessionEvidence.observe_span
    totals: dict[str, list[int]] = {}

    def observe_span(self: session_module.SessionEvidence, view: views.SpanView) -> None:
        start = clock()
        try:
            original(self, view)
        finally:
            total = totals.setdefault(view.name, [0, 0])
            total[0] += clock() - start
            total[1] += 1

    session_module.SessionEvidence.observe_span = observe_span  # type: ignore[method-assign]
    try:
        bench.detect_cost(bodies)
    finally:
        session_module.SessionEvidence.observe_span = original  # type: ignore[method-assign]
    return [(name, count, ns / 1e3 / count) for name, (ns, count) in totals.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--by-kind", action="store_true", help="observe_span's cost per span name")
    parser.add_argument("--kinds", type=int, default=25, help="span kinds printed (--by-kind)")

    opts = parser.parse_args(argv)
    bodies, spans = bench.requests_for(opts.sessions)
    plain = min(bench.detect_cost(bodies) for _ in range(opts.rounds))
    print(f"detect_cost: {plain:.1f} us of CPU a span over {spans} spans (no timers, best of {opts.rounds})")
    best: dict[str, tuple[float, float]] = {}
    for _ in range(opts.rounds):
        for label, calls, us in shares(bodies, spans):
            if label not in best or us < best[label][1]:
                best[label] = (calls, us)
    print(f"{'stage':<52} {'calls/span':>10} {'us/span':>8} {'share':>6}")
    for label, (calls, us) in best.items():
        print(f"{label:<52} {calls:>10.2f} {us:>8.1f} {us / plain:>6.0%}")
    if opts.by_kind:
        kinds: dict[str, tuple[int, float]] = {}
        for _ in range(opts.rounds):
            for name, count, us in by_kind(bodies):
                if name not in kinds or us < kinds[name][1]:
                    kinds[name] = (count, us)
        whole = sum(count * us for count, us in kinds.values())
        print(f"{'span kind (observe_span)':<52} {'spans':>10} {'us each':>8} {'share':>6}")
        for name, (count, us) in sorted(kinds.items(), key=lambda k: -k[1][0] * k[1][1])[: opts.kinds]:
            print(f"{name[:52]:<52} {count:>10} {us:>8.1f} {count * us / whole:>6.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
