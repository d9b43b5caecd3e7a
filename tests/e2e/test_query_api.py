"""GET /v1/sessions against a real ``skillgauge serve``: a few hundred re-keyed recorded
sessions judged by the fake judge, listed with each filter and paged, the same before and
after a restart; past ``storage.retention`` nothing is served."""

from __future__ import annotations

import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropic
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from perf.bench import requests_for
from support import Server, wait_for

SESSIONS = 300
EXPECT = [{"when": {"user_message": "release notes"}, "expect": ["release-notes"]}]


def post(server: Server, body: bytes) -> None:
    request = urllib.request.Request(
        f"{server.http_url}/v1/traces", body, {"Content-Type": "application/x-protobuf"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200


def renamed(bodies: list[bytes], prefix: str) -> list[bytes]:
    """The same sessions under other ids (``bench-`` becomes ``prefix``) and other traces."""
    out = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            for kvs in (rs.resource.attributes, *(s.attributes for ss in rs.scope_spans for s in ss.spans)):
                for kv in kvs:
                    if kv.value.string_value.startswith("bench-"):
                        kv.value.string_value = prefix + kv.value.string_value.removeprefix("bench-")
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.trace_id = b"\x7f" + span.trace_id[1:]
        out.append(request.SerializeToString())
    return out


def listing(server: Server, **params: Any) -> tuple[list[dict[str, Any]], str | None]:
    status, body = server.get_json(f"/v1/sessions?{urllib.parse.urlencode(params)}")
    assert status == 200, body
    return body["sessions"], body["next_cursor"]


def walk(server: Server, limit: int, **params: Any) -> list[dict[str, Any]]:
    """Every page of a query, following ``next_cursor``."""
    rows, cursor = listing(server, limit=limit, **params)
    while cursor is not None:
        page, cursor = listing(server, limit=limit, cursor=cursor, **params)
        assert page
        rows += page
    return rows


def config(judge_url: str, **storage: str) -> dict[str, Any]:
    return {
        "judge": {"base_url": judge_url, "api_key": "test"},
        "expectations": EXPECT,
        "storage": storage,
    }


def queries(everything: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(query parameters, the rows of ``everything`` they must answer, in order)."""

    def where(**match: Any) -> list[dict[str, Any]]:
        return [
            row
            for row in everything
            if any(all(e[k] == v for k, v in match.items()) for e in row["evaluations"])
        ]

    evaluations = [e for row in everything for e in row["evaluations"]]
    skill = next(e["skill"] for e in evaluations if e["skill"])
    status, reason = next((e["status"], e["reason"]) for e in evaluations if e["status"] != "judged")
    newer, older = everything[100]["closed_at"], everything[200]["closed_at"]
    cases: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        ({}, everything),
        (
            {"evaluation": "skill_omission", "status": "judged"},
            where(evaluation="skill_omission", status="judged"),
        ),
        ({"evaluation": "skill_invoked", "passed": "false"}, where(evaluation="skill_invoked", passed=False)),
        ({"passed": "true"}, where(passed=True)),
        ({"status": status, "reason": reason}, where(status=status, reason=reason)),
        (  # several statuses: a row with any of them
            {"status": f"error,{status}"},
            [r for r in everything if any(e["status"] in ("error", status) for e in r["evaluations"])],
        ),
        ({"skill": skill}, where(skill=skill)),
        (
            {"since": datetime.fromtimestamp(older, UTC).isoformat(), "until": str(newer)},
            [row for row in everything if older <= row["closed_at"] < newer],
        ),
        ({"tenant": ""}, everything),
        ({"tenant": "team-a"}, []),
    ]
    for framework in sorted({row["framework"] for row in everything}):
        cases.append(({"framework": framework}, [row for row in everything if row["framework"] == framework]))
    return cases


def test_sessions_are_listed_filtered_and_paged_the_same_before_and_after_a_restart(tmp_path: Path) -> None:
    bodies, _ = requests_for(SESSIONS, spans_per_request=256)
    fake = FakeAnthropic().start()
    try:
        srv = Server(tmp_path, config(fake.base_url))
        try:
            for body in bodies:
                post(srv, body)
            wait_for(lambda: len(listing(srv, limit=500)[0]) == SESSIONS, timeout=120, interval=0.5)
            everything = walk(srv, 500)
            assert {row["session_id"] for row in everything} == {f"bench-{n:07d}" for n in range(SESSIONS)}
            keys = [(row["closed_at"], row["session_id"], row["revision"]) for row in everything]
            assert keys == sorted(keys, reverse=True)  # newest first
            assert len({row["framework"] for row in everything}) >= 3

            cases = queries(everything)
            for params, expected in cases:
                if params not in ({}, {"tenant": ""}, {"tenant": "team-a"}):  # each filter selects some
                    assert 0 < len(expected) < len(everything), (params, len(expected))
                assert walk(srv, 23, **params) == expected, params
            assert walk(srv, 37) == everything  # pages of another size: the same rows, once each

            # A page's cursor stays where it was while newer sessions arrive.
            first, cursor = listing(srv, limit=50)
            assert first == everything[:50]
            late = renamed(requests_for(5)[0], "late-")
            for body in late:
                post(srv, body)
            wait_for(
                lambda: len(listing(srv, limit=500, since=str(everything[0]["closed_at"] + 0.0001))[0]) == 5,
                60,
            )
            second, _ = listing(srv, limit=50, cursor=cursor)
            assert second == everything[50:100]
            newest, _ = listing(srv, limit=5)
            assert {row["session_id"] for row in newest} == {f"late-{n:07d}" for n in range(5)}
            before = [(params, walk(srv, 41, **params)) for params, _ in cases]

            row = everything[7]
            status, detail = srv.get_json(row["detail"])
            assert status == 200
            (revision,) = detail["revisions"]
            assert revision["records"][-1]["coverage"]["session_id"] == row["session_id"]
        finally:
            assert srv.stop() == 0
        srv = Server(tmp_path, config(fake.base_url))
        try:
            for params, rows in before:
                assert walk(srv, 41, **params) == rows, params
            status, after = srv.get_json(row["detail"])
            assert status == 200 and after == detail
        finally:
            srv.stop()
    finally:
        fake.stop()


BAD = [
    ("limit=0", "limit"),
    ("limit=501", "limit"),
    ("limit=ten", "limit"),
    ("since=yesterday", "since"),
    ("until=2026-01-01T00:00:00", "until"),  # no offset: whose midnight?
    ("since=200&until=100", "since"),
    ("passed=maybe", "passed"),
    ("cursor=not-a-cursor", "cursor"),
    ("status=", "status"),
    ("status=skipped,passed", "status"),
    ("sort=oldest", "sort"),
]


def test_a_bad_parameter_answers_400_naming_it_and_the_fix(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    try:
        for query, named in BAD:
            status, body = srv.get_json(f"/v1/sessions?{query}")
            assert status == 400, query
            message = body["message"]
            assert message.startswith(f"{named}:") or f"{named!r}" in message, (query, message)
            assert any(f" {word} " in message for word in ("use", "give", "pass")), (query, message)
    finally:
        srv.stop()


def test_results_past_retention_are_not_served(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"storage": {"retention": "3s", "checkpoint_interval": "0.5s"}})
    try:
        post(srv, requests_for(1)[0][0])
        rows = wait_for(lambda: listing(srv)[0], timeout=30)
        detail = rows[0]["detail"]
        assert srv.get_json(detail)[0] == 200
        wait_for(lambda: not listing(srv)[0] and srv.get_json(detail)[0] == 404, timeout=30)
        assert srv.get_json("/v1/sessions?since=0")[1]["sessions"] == []
    finally:
        srv.stop()
