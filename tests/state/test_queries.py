"""The store's reads for the status API, on the data directory's SQLite, in memory and with
``storage.shared`` on a real PostgreSQL: a session's revisions, the listing (latest revision
only, filters, keyset pages), the overview totals, retention; an older spool's coverage rows
indexed at open; requests a reopenable revision keeps."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.state.facade import Store
from collector.state.types import Reopenable, Spool, encode_record
from collector.status import view
from collector.status.readers import StatusReads
from collector.status.view import SessionQuery
from collector.testing import memory_store


def result(session: str, revision: int, evaluation: str, status: str, reason: str, **extra: Any) -> str:
    return encode_record(
        {
            "evaluation": evaluation,
            "status": status,
            "reason": reason,
            "session_id": session,
            "revision": revision,
            **extra,
        }
    )


def line(session: str, revision: int, closed_at: float, framework: str, **extra: Any) -> str:
    return encode_record(
        {
            "session_id": session,
            "revision": revision,
            "closed_at": closed_at,
            "framework": framework,
            "close_reason": "idle_timeout",
            "spans": 4,
            "catalog": {"state": "advertised", "skills": ["pdf", "xlsx"]},
            "loads_by_status": {"loaded": 1, "failed": 0},
            "expectations": {"expected": ["pdf"], "missed": []},
            "judge": {"cost_usd": 0.25},
            **extra,
        }
    )


async def fill(spool: Spool, now: float) -> None:
    """s0..s9 closed a second apart (s9 newest); s3 has a revision 2, which failed omission."""
    for n in range(10):
        session = f"s{n}"
        omission = result(session, 1, "skill_omission", "judged", "judged", passed=True, skill=None)
        invoked = result(session, 1, "skill_invoked", "judged", "judged", passed=n % 2 == 0, skill="pdf")
        missed = {"expectations": {"expected": ["pdf"], "missed": [] if n % 2 == 0 else ["pdf"]}}
        await spool.save_coverage(
            [
                (
                    session,
                    1,
                    [omission, invoked],
                    line(session, 1, now - 100 + n, "strands" if n < 5 else "adk", **missed),
                )
            ]
        )
    failed = result("s3", 2, "skill_omission", "judged", "judged", passed=False)
    await spool.save_coverage([("s3", 2, [failed], line("s3", 2, now - 50, "strands"))])


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgresql"])
def test_listing_filters_pages_and_overview(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    shared = request.getfixturevalue("postgres_server").url() if kind == "postgresql" else None

    async def run() -> None:
        spool: Spool = memory_store() if kind == "memory" else Store(tmp_path, shared=shared)
        now = time.time()
        await fill(spool, now)
        page = await StatusReads(spool).sessions(SessionQuery(limit=500), 0)
        # Latest revisions only, newest first: s3 (its revision 2) first.
        assert [(r["session_id"], r["revision"]) for r in page.rows] == [("s3", 2)] + [
            (f"s{n}", 1) for n in (9, 8, 7, 6, 5, 4, 2, 1, 0)
        ]
        assert page.next_cursor is None
        row = page.rows[0]
        assert row["detail"] == "/v1/sessions/s3" and row["catalog"] == {"state": "advertised", "skills": 2}
        assert row["evaluations"] == [
            {
                "evaluation": "skill_omission",
                "status": "judged",
                "reason": "judged",
                "skill": None,
                "passed": False,
            }
        ]

        async def ids(**filters: Any) -> list[str]:
            rows, cursor = [], None
            while True:
                got = await StatusReads(spool).sessions(SessionQuery(limit=3, cursor=cursor, **filters), 0)
                rows += [r["session_id"] for r in got.rows]
                if got.next_cursor is None:
                    return rows
                cursor = got.next_cursor

        assert await ids() == [r["session_id"] for r in page.rows]  # pages of 3: the same rows
        assert await ids(evaluation="skill_omission", passed=False) == ["s3"]
        assert await ids(evaluation="skill_invoked", passed=False) == [
            "s9",
            "s7",
            "s5",
            "s1",
        ]  # not s3: rev 2
        assert await ids(skill="pdf", passed=True) == ["s8", "s6", "s4", "s2", "s0"]
        assert await ids(framework="adk") == ["s9", "s8", "s7", "s6", "s5"]
        assert await ids(since=now - 96, until=now - 93) == ["s6", "s5", "s4"]
        assert await ids(tenant="") == await ids()
        assert await ids(tenant="team-a") == []
        assert await ids(status="error") == []

        overview = await StatusReads(spool).overview(now - 1000, 0)
        assert overview["sessions"] == 10
        assert overview["loads_by_status"] == {"loaded": 10, "failed": 0, "denied": 0, "unresolved": 0}
        assert (overview["sessions_with_expectations"], overview["sessions_missing_expected"]) == (10, 4)
        assert overview["skipped_skill_rate"] == 0.4
        assert (overview["omission_verdicts"], overview["omission_rate"]) == (10, 0.1)
        assert overview["judge_cost_usd"] == 2.75  # every revision's spend, s3's two included
        recent = await StatusReads(spool).overview(now - 95, 0)
        assert recent["sessions"] == 6 and recent["omission_rate"] == pytest.approx(1 / 6)

        (first, second) = await StatusReads(spool).revisions("s3", 0)
        assert first[-1]["coverage"]["revision"] == 1 and second[-1]["coverage"]["revision"] == 2
        assert [r["evaluation"] for r in first[:-1]] == ["skill_omission", "skill_invoked"]
        assert "results" not in second[-1]["coverage"]
        # Past retention nothing is served, even before a checkpoint deletes it.
        assert await StatusReads(spool).revisions("s3", time.time() + 1) == []
        assert (await StatusReads(spool).sessions(SessionQuery(), time.time() + 1)).rows == []
        await spool.checkpoint(1, keep_results_for=-1)
        assert (await StatusReads(spool).sessions(SessionQuery(), 0)).rows == []
        assert (await StatusReads(spool).overview(0, 0))["sessions"] == 0
        await spool.shutdown()

    asyncio.run(run())


def test_a_cursor_is_opaque_and_checked() -> None:
    cursor = view.encode_cursor(1767225600.5, "s/1", 2)
    assert "s/1" not in cursor
    assert view.decode_cursor(cursor) == (1767225600.5, "s/1", 2)
    for bad in ("", "abc", view.encode_cursor(1.0, "s", 1)[:-3], "W10"):
        with pytest.raises(ValueError):
            view.decode_cursor(bad)


def test_an_older_spool_is_indexed_for_the_listing_when_opened(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "skillgauge.sqlite")
    db.executescript(
        "CREATE TABLE coverage (session TEXT NOT NULL, revision INTEGER NOT NULL, record TEXT NOT NULL, "
        "evaluated_at REAL NOT NULL, PRIMARY KEY (session, revision));"
    )
    record = line(
        "old",
        1,
        1000.0,
        "strands",
        results=[{"evaluation": "skill_omission", "status": "skipped", "reason": "sampled_out"}],
    )
    with db:
        db.execute("INSERT INTO coverage VALUES ('old', 1, ?, ?)", (record, time.time()))
    db.close()

    async def run() -> list[dict[str, Any]]:
        spool = Store(tmp_path)
        rows = (await StatusReads(spool).sessions(SessionQuery(reason="sampled_out"), 0)).rows
        await spool.shutdown()
        return rows

    (row,) = asyncio.run(run())
    assert (row["session_id"], row["closed_at"], row["framework"]) == ("old", 1000.0, "strands")


def test_requests_of_a_reopenable_revision_outlive_checkpoints_until_forgotten(tmp_path: Path) -> None:
    async def run() -> None:
        spool = Store(tmp_path)
        ids = [await spool.append("traces", f"request {n}".encode()) for n in range(4)]
        spool.keep_reopenable(Reopenable("s", 1, ids[0], (ids[0], ids[2]), ("ab" * 16,), 3))
        await spool.checkpoint(ids[3] + 1)  # no open session needs any of them
        assert [r for r, _, _ in await spool.read_requests(tuple(ids))] == [ids[0], ids[2]]
        assert [p for _, _, p in await spool.read_requests((ids[2],))] == [b"request 2"]
        await spool.shutdown()
        reopened = Store(tmp_path)
        (entry,) = reopened.recovery().reopenable
        assert entry == Reopenable("s", 1, ids[0], (ids[0], ids[2]), ("ab" * 16,), 3)
        reopened.forget_reopenable("s")
        await reopened.checkpoint(ids[3] + 1)
        assert await reopened.read_requests(tuple(ids)) == []
        await reopened.shutdown()
        again = Store(tmp_path)
        assert again.recovery().reopenable == []
        await again.shutdown()

    asyncio.run(run())


def test_keeps_and_forgets_written_together_end_as_if_written_one_by_one(tmp_path: Path) -> None:
    """A wave of closed sessions queues keeps and forgets in turn; the store writes them in a
    few statements, which must leave what each in order would have left."""

    async def run() -> tuple[list[int], list[Reopenable]]:
        spool = Store(tmp_path)
        ids = [await spool.append("traces", f"request {n}".encode()) for n in range(4)]
        trace = ("ab" * 16,)
        gate = threading.Event()  # the writer waits until every operation below is queued
        spool._writer.put(lambda db: gate.wait())
        spool.keep_reopenable(Reopenable("a", 1, ids[0], (ids[0],), trace, 1))
        spool.forget_reopenable("a")
        spool.keep_reopenable(Reopenable("a", 2, ids[0], (ids[0], ids[1]), trace, 2))  # kept again after
        spool.keep_reopenable(Reopenable("b", 1, ids[2], (ids[2],), trace, 1))
        spool.forget_reopenable("b")  # forgotten after
        spool.keep_reopenable(Reopenable("c", 1, ids[3], (ids[3],), trace, 1))
        spool.keep_reopenable(Reopenable("c", 2, ids[3], (ids[3],), trace, 2))  # the later revision wins
        gate.set()
        await spool.checkpoint(ids[3] + 1)
        held = [r for r, _, _ in await spool.read_requests(tuple(ids))]
        assert held == [ids[0], ids[1], ids[3]]  # b's request is no longer held
        await spool.shutdown()
        again = Store(tmp_path)
        entries = sorted(again.recovery().reopenable, key=lambda e: e.session)
        await again.shutdown()
        return ids, entries

    ids, entries = asyncio.run(run())
    assert [(e.session, e.revision, e.requests) for e in entries] == [
        ("a", 2, (ids[0], ids[1])),
        ("c", 2, (ids[3],)),
    ]


def _revision(session: str, now: float) -> tuple[str, int, list[str], str]:
    """Revision 1 of ``session`` with two verdicts, as the recorder hands it to a spool."""
    return (
        session,
        1,
        [
            result(session, 1, "skill_omission", "judged", "judged", passed=True, skill=None),
            result(session, 1, "skill_invoked", "judged", "judged", passed=True, skill="pdf"),
        ],
        line(session, 1, now, "strands"),
    )


def _rows(spool: Store, table: str) -> int:
    # Rows left behind are memory the process never gets back: counted where they live.
    db = spool.location.connect()
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


def test_the_memory_spool_keeps_its_latest_revisions_and_only_their_verdicts() -> None:
    async def run() -> None:
        spool = memory_store(revisions_capacity=5)
        now = time.time()
        for n in range(5):
            await spool.save_coverage([_revision(f"s{n}", now)])
        await spool.save_coverage([_revision("s0", now)])  # saved again: now the newest
        await spool.save_coverage([_revision(f"s{n}", now) for n in (5, 6, 7)])
        page = await StatusReads(spool).sessions(SessionQuery(limit=100), 0)
        assert sorted(r["session_id"] for r in page.rows) == ["s0", "s4", "s5", "s6", "s7"]
        assert (_rows(spool, "coverage"), _rows(spool, "verdicts")) == (5, 10)
        assert await StatusReads(spool).revisions("s1", 0) == []
        # Retention empties it; then a full capacity of new revisions is kept whole.
        await spool.checkpoint(1, keep_results_for=-1)
        assert (_rows(spool, "coverage"), _rows(spool, "verdicts")) == (0, 0)
        await spool.save_coverage([_revision(f"t{n}", now) for n in range(5)])
        page = await StatusReads(spool).sessions(SessionQuery(limit=100), 0)
        assert sorted(r["session_id"] for r in page.rows) == [f"t{n}" for n in range(5)]
        # A save that fails commits nothing and lets nothing go; the next ones keep five.
        bad = ("u0", 1, [], '{"session_id": "u0", not JSON}')
        with pytest.raises(ValueError):
            await spool.save_coverage([_revision("u1", now), bad])
        assert (_rows(spool, "coverage"), _rows(spool, "verdicts")) == (5, 10)
        await spool.save_coverage([_revision(f"v{n}", now) for n in range(3)])
        page = await StatusReads(spool).sessions(SessionQuery(limit=100), 0)
        assert sorted(r["session_id"] for r in page.rows) == ["t3", "t4", "v0", "v1", "v2"]
        assert (_rows(spool, "coverage"), _rows(spool, "verdicts")) == (5, 10)

    asyncio.run(run())


def test_what_a_save_costs_the_memory_spool_does_not_grow_with_what_it_keeps() -> None:
    """Counted in SQLite virtual machine steps, not timed: a save past capacity lets its
    oldest revisions go without counting or scanning the rows kept (before, every save
    counted ``coverage`` and searched all of ``verdicts``: a served replica with durability
    off spent most of its loop there once 10,000 sessions had closed)."""

    def steps_of_a_save(capacity: int) -> int:
        async def run() -> int:
            spool = memory_store(revisions_capacity=capacity)
            now = time.time()
            for start in range(0, capacity + 100, 100):
                await spool.save_coverage([_revision(f"s{n}", now) for n in range(start, start + 100)])
            steps = [0]

            def count() -> int:
                steps[0] += 1
                return 0

            # Counted on the writer's connection, where saves run.
            await spool.transact(lambda db: db.connection.set_progress_handler(count, 10))
            await spool.save_coverage([_revision(f"new{n}", now) for n in range(20)])
            await spool.transact(lambda db: db.connection.set_progress_handler(None, 10))
            await spool.shutdown()
            return steps[0]

        return asyncio.run(run())

    small, large = steps_of_a_save(200), steps_of_a_save(4_000)
    assert large < 1.5 * small, (small, large)
