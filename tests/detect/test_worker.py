"""Detection in a worker process gives the sessions inline detection gives, for every
recorded framework session; and the worker's life cycle is the serving process's."""

from __future__ import annotations

import asyncio
import os
import signal

from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.detect.worker import WorkerDetection
from collector.sessions.assembler import Accepted, Assembler
from evaluators.evidence import Session


def _requests() -> list[tuple[str, bytes]]:
    found: list[tuple[str, bytes]] = []
    for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")):
        found += [("traces", request.SerializeToString()) for request in trace_requests(path)]
        logs = path.with_name(path.name.replace(".traces.", ".logs."))
        if logs.exists():
            for line in logs.read_text().splitlines():
                found.append(("logs", Parse(line, ExportLogsServiceRequest()).SerializeToString()))
    return found


def _assemble(assembler: Assembler, requests: list[tuple[str, bytes]]) -> None:
    for n, (signal_name, raw) in enumerate(requests):
        if signal_name == "traces":
            request = ExportTraceServiceRequest.FromString(raw)
            for _ in assembler.feed(request, n + 1, Accepted(), slice_spans=3, raw=raw):
                pass
        else:
            assembler.add_logs(ExportLogsServiceRequest.FromString(raw), n + 1, raw=raw)
    # A late span for a session closed whole reopens it: the second revision carries both.
    first = requests[0][1]
    assembler.close_all("idle_timeout")
    _assemble_again(assembler, first, len(requests) + 1)
    assembler.close_all("shutdown")


def _assemble_again(assembler: Assembler, raw: bytes, request_id: int) -> None:
    assembler.add_spans(ExportTraceServiceRequest.FromString(raw), request_id, raw=raw)


def _by_key(sessions: list[tuple[Session, str]]) -> dict[tuple[str, int], tuple[Session, str]]:
    return {(session.session_id, session.revision): (session, reason) for session, reason in sessions}


def test_worker_and_inline_detection_give_the_same_sessions() -> None:
    _assert_the_same_sessions(_requests())


def test_requests_larger_than_the_childs_buffer_arrive_whole_between_small_ones() -> None:
    # The child reads request bytes into one buffer it reuses: a 3 MB request must grow it,
    # and the small requests after it must not read the big one's leftovers.
    requests = _requests()
    position = next(n for n, (signal_name, _) in enumerate(requests) if signal_name == "traces")
    request = ExportTraceServiceRequest.FromString(requests[position][1])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    padding = span.attributes.add()
    padding.key, padding.value.string_value = "padding", "x" * (3 << 20)
    requests[position] = ("traces", request.SerializeToString())
    assert len(requests[position][1]) > 3 << 20
    _assert_the_same_sessions(requests)


def _assert_the_same_sessions(requests: list[tuple[str, bytes]]) -> None:
    config = parse({}).sessions

    inline: list[tuple[Session, str]] = []
    _assemble(Assembler(config, lambda session, reason: inline.append((session, reason))), requests)

    async def in_worker() -> list[tuple[Session, str]]:
        delivered: list[tuple[Session, str]] = []
        worker = WorkerDetection(lambda session, reason: delivered.append((session, reason)), ())
        worker.start()
        try:
            _assemble(Assembler(config, lambda s, r: None, detection=worker), requests)
            await worker.settle(30)
            assert worker.finishing == 0 and worker.backlog == 0
        finally:
            await worker.stop()
        return delivered

    worked = asyncio.run(in_worker())
    assert len(inline) > 20 and any(session.revision == 2 for session, _ in inline)
    assert any(load for session, _ in inline for load in session.skill_loads)
    assert _by_key(worked) == _by_key(inline)


def test_a_worker_that_dies_with_work_in_hand_stops_the_server() -> None:
    """The assembler's state is in the serving process; the evidence is in the worker.  A
    worker gone mid-session cannot be rebuilt in place: the server stops (SIGTERM to itself,
    the graceful path) so that a restart replays the spool, and it says why."""
    signalled: list[int] = []

    async def scenario() -> WorkerDetection:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: signalled.append(signal.SIGTERM))
        worker = WorkerDetection(lambda session, reason: None, ())
        worker.start()
        assembler = Assembler(parse({}).sessions, lambda s, r: None, detection=worker)
        _, raw = _requests()[0]
        _assemble_again(assembler, raw, 1)
        await worker.settle(10)
        assert worker._child is not None
        os.kill(worker._child.pid, signal.SIGKILL)
        assembler.close_all("shutdown")  # a finish the dead worker can never answer
        for _ in range(100):
            if worker.lost:
                break
            await asyncio.sleep(0.05)
        await worker.settle(1)  # returns at once: nothing more will come
        loop.remove_signal_handler(signal.SIGTERM)
        return worker

    worker = asyncio.run(scenario())
    assert worker.lost and signalled == [signal.SIGTERM]


def test_a_session_the_worker_cannot_finish_is_answered_for() -> None:
    """A finish that raises in the worker is logged there and answered, so the server does
    not wait for it at shutdown; the revision stays unfinished (a restart evaluates it)."""

    async def scenario() -> WorkerDetection:
        delivered: list[Session] = []
        worker = WorkerDetection(lambda session, reason: delivered.append(session), ())
        worker.start()
        try:
            worker.finish("never-opened", 1, "shutdown", keep=False)  # finishes an empty session
            worker.finishing += 1  # a finish the worker cannot carry out (a malformed message)
            worker._send(("finish", "bad", 1, "shutdown", False, "one field too many"))
            await worker.settle(10)
            assert worker.finishing == 0 and len(delivered) == 1
            assert await worker.skill_loads("never-opened") is None
        finally:
            await worker.stop()
        return worker

    assert not asyncio.run(scenario()).lost


def test_the_workers_mapped_spans_read_every_recorded_attribute_as_the_full_classes_do() -> None:
    """The worker parses spans with their attributes, and their events', as maps
    (``collector.spans.map_entry``); every recorded span must read the same through them:
    declared keys, any other key, prefixes, event fields."""
    import collector.detect  # noqa: F401  (declares the keys views collect)
    from collector.spans import Attributes, MappedTracesData, _event_values, decoded_value, value_of

    spans = 0
    for signal_name, raw in _requests():
        if signal_name != "traces":
            continue
        full, mapped = ExportTraceServiceRequest.FromString(raw), MappedTracesData.FromString(raw)
        for full_rs, mapped_rs in zip(full.resource_spans, mapped.resource_spans, strict=True):
            for full_ss, mapped_ss in zip(full_rs.scope_spans, mapped_rs.scope_spans, strict=True):
                for one, other in zip(full_ss.spans, mapped_ss.spans, strict=True):
                    a, b = Attributes(one.attributes), Attributes(other.attributes)
                    assert dict(b.indexed) == dict(a.indexed)
                    assert set(b.keys()) == set(a.keys())
                    assert all(b.get(key) == a.get(key) for key in set(a.keys()))
                    assert b.get("not.sent") is None and "not.sent" not in b
                    assert sorted(b.keys_with_prefix("llm.")) == sorted(a.keys_with_prefix("llm."))
                    # Everything else is the same field by field (maps serialize in their own order).
                    same = ("trace_id", "span_id", "name", "start_time_unix_nano", "end_time_unix_nano")
                    assert all(getattr(other, f) == getattr(one, f) for f in same)
                    assert len(other.events) == len(one.events)
                    for e, f in zip(other.events, one.events, strict=True):
                        assert (e.name, e.time_unix_nano) == (f.name, f.time_unix_nano)
                        read = {key: decoded_value(raw) for key, raw in e.attributes.items()}
                        assert read == {kv.key: value_of(kv.value) for kv in f.attributes}
                    assert _event_values(other) == _event_values(one)
                    assert other.status.SerializeToString() == one.status.SerializeToString()
                    spans += 1
    assert spans > 100
