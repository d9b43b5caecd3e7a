"""Memory follows what is open: sessions that closed with large catalogs of their own, or
whose spans each carried attribute keys never seen before, leave no more behind than the
byte-sized caches hold (``skillgauge_cache_bytes{cache}``).

Measured from outside: the resident set of a real ``skillgauge serve`` read from /proc.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import Server, export_grpc, metric_value, wait_for

SESSIONS = 80
CATALOG_BYTES = 2 * 1024 * 1024
MAX_GROWTH = 200 * 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def catalog(n: int) -> str:
    """A catalog of its own for session ``n``: about 2 MB of skills none other shows."""
    entry = "<skill><name>s{n}-{i}</name><description>" + "d" * 180 + " {n}.{i}</description></skill>\n"
    count = CATALOG_BYTES // len(entry)
    return "<available_skills>\n" + "".join(entry.format(n=n, i=i) for i in range(count)) + "</available_skills>"


def one_span_session(n: int, session: str, attributes: dict[str, str]) -> bytes:
    """A request of one span, session ``session`` (ended by it), with ``attributes``."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=(n + 1).to_bytes(16, "big"),
        span_id=(n + 1).to_bytes(8, "big"),
        name="chat",
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_001_000_000_000,
    )
    span.attributes.add(key="session.id").value.string_value = session
    for key, value in attributes.items():
        span.attributes.add(key=key).value.string_value = value
    span.attributes.add(key="skillgauge.session.end").value.bool_value = True
    return request.SerializeToString()


def session_request(n: int) -> bytes:
    return one_span_session(n, f"catalog-{n}", {"gen_ai.system_instructions": catalog(n)})


def _closed(srv: Server) -> float:
    return metric_value(srv.metrics(), "skillgauge_sessions_closed_total", reason="end_attribute")


def _recorded(srv: Server, session: str) -> bool:
    status, page = srv.get_json(f"/v1/sessions/{session}")
    return status == 200 and bool(page["revisions"])


def test_closed_sessions_with_large_catalogs_of_their_own_give_their_memory_back(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    try:
        for n in range(2):  # warm up: modules, the store, the first caches
            export_grpc(srv, session_request(SESSIONS + n))
        wait_for(lambda: _closed(srv) == 2, timeout=60)
        before = rss_bytes(srv.proc.pid)
        for n in range(SESSIONS):
            export_grpc(srv, session_request(n))
        wait_for(lambda: _closed(srv) == SESSIONS + 2, timeout=300, interval=0.5)
        # Closed, then evaluated and recorded: the record commits with the store's next group.
        wait_for(lambda: _recorded(srv, f"catalog-{SESSIONS - 1}"), timeout=60)
        text = srv.metrics()
        after = rss_bytes(srv.proc.pid)
        cached = {
            name: metric_value(text, "skillgauge_cache_bytes", cache=name)
            for name in ("catalogs", "json", "skill_md", "frameworks", "reopen")
        }
        print(f"RSS {before / 2**20:.0f} MB -> {after / 2**20:.0f} MB; caches {cached}")
        assert after - before < MAX_GROWTH, f"RSS grew {(after - before) / 2**20:.0f} MB"
        assert 0 < cached["catalogs"] <= 32 * 2**20
        # Kept for reopening as request ids (a durable spool): no evidence held.
        assert cached["reopen"] == 0
        assert "skillgauge_cache_max_bytes" in text
    finally:
        srv.stop()


FLOOD_REQUESTS = 400
FLOOD_KEYS = 500  # a span's keys, each of ~1,000 characters: 0.5 MB of keys a span


def flood_request(n: int) -> bytes:
    """One span whose attribute keys no other span has (a hostile client's)."""
    return one_span_session(n, f"keys-{n}", {f"k{n}.{k}." + "x" * 1000: "v" for k in range(FLOOD_KEYS)})


def test_spans_with_ever_new_attribute_keys_leave_no_more_than_the_key_shapes_cache_holds(
    tmp_path: Path,
) -> None:
    srv = Server(tmp_path)
    try:
        for n in range(2):  # warm up
            export_grpc(srv, flood_request(FLOOD_REQUESTS + n))
        wait_for(lambda: _closed(srv) == 2, timeout=60)
        before = rss_bytes(srv.proc.pid)
        for n in range(FLOOD_REQUESTS):  # 200 MB of keys
            export_grpc(srv, flood_request(n))
        wait_for(lambda: _closed(srv) == FLOOD_REQUESTS + 2, timeout=300, interval=0.5)
        text = srv.metrics()
        after = rss_bytes(srv.proc.pid)
        held = metric_value(text, "skillgauge_cache_bytes", cache="key_shapes")
        most = metric_value(text, "skillgauge_cache_max_bytes", cache="key_shapes")
        not_kept = metric_value(text, "skillgauge_cache_evictions_total", cache="key_shapes")
        print(f"RSS {before / 2**20:.0f} MB -> {after / 2**20:.0f} MB; key shapes {held / 2**20:.1f} MB")
        assert after - before < 100 * 2**20, f"RSS grew {(after - before) / 2**20:.0f} MB"
        assert 0 < held <= most <= 32 * 2**20
        assert not_kept > FLOOD_REQUESTS / 2  # most shapes were not kept: the cache was full
    finally:
        srv.stop()
