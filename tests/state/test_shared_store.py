"""The shared store on a real PostgreSQL (``storage.shared``), started for this module: the
outbox keeps ``MemoryOutbox``'s entries, order, drop counts and a true length; verdicts and
waiting judge work survive a restart; two replicas' stores sharing one database each list
both replicas' sessions, and each restart takes back only the judge work its replica queued."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.evaluate.pending import StoredPending
from collector.export.outbox import Entry, MemoryOutbox, SpoolOutbox
from collector.state.database import open_shared
from collector.state.facade import Store
from collector.state.types import Closed, encode_record
from collector.status.readers import StatusReads
from collector.status.view import SessionQuery
from evaluators.evidence import Session

KEYS = st.sampled_from("abcdefgh")
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["put", "ack"]), st.lists(KEYS, max_size=6)), min_size=1, max_size=20
)


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url) as db:
        row = db.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_the_outbox_on_postgresql_keeps_the_memory_outboxs_entries(postgres_server: Postgres) -> None:  # noqa: F811
    url = postgres_server.url()
    open_shared(url)  # the tables, before the first example empties them

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(operations=OPERATIONS, capacity=st.integers(1, 5))
    def check(operations: list[tuple[str, list[str]]], capacity: int) -> None:
        with psycopg.connect(url, autocommit=True) as db:  # each example from an empty outbox
            db.execute("DELETE FROM outbox")
            db.execute("DELETE FROM outbox_rows")

        async def run(path: Path) -> None:
            store = Store(path, outbox_capacity=capacity, shared=url)
            shared, model = SpoolOutbox(store, "traces"), MemoryOutbox(capacity)
            try:
                for step, (op, keys) in enumerate(operations):
                    if op == "put":
                        entries = [Entry(k, f"{k}{step}".encode(), float(step)) for k in keys]
                        assert await shared.put(entries) == await model.put(entries)
                    else:
                        await shared.ack(keys)
                        await model.ack(keys)
                    assert await shared.peek(10) == await model.peek(10)
                    assert len(shared) == len(model) == _count(url, "SELECT COUNT(*) FROM outbox")
            finally:
                await store.shutdown()

        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(run(Path(tmp)))

    check()


def _line(session: str, closed_at: float) -> str:
    return encode_record({"session_id": session, "revision": 1, "closed_at": closed_at, "framework": "adk"})


def _verdict(session: str) -> str:
    return encode_record(
        {"evaluation": "skill_invoked", "status": "judged", "reason": "judged", "session_id": session, "passed": True}
    )


def test_replicas_sharing_one_database_list_each_others_sessions_and_keep_their_own_work(
    postgres_server: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = postgres_server.url()

    async def first_lives() -> None:
        a, b = Store(tmp_path / "a", shared=url), Store(tmp_path / "b", shared=url)
        now = time.time()
        for n, store in enumerate((a, b)):
            store.record_closed(Closed(f"s{n}", 1, "idle", 1, 1, ()))
            await store.save_result(f"s{n}|1|judge", f"s{n}", 1, {"score": n})
            await store.save_coverage([(f"s{n}", 1, [_verdict(f"s{n}")], _line(f"s{n}", now - n))])
        # Judge work each replica queued for a revision not yet evaluated.
        StoredPending(a).pending_add([("a-work", "open-a", 1, "skill_omission", now)], Session("open-a"), now)
        StoredPending(b).pending_add([("b-work", "open-b", 1, "skill_omission", now)], Session("open-b"), now)
        for store in (a, b):  # each answers for the cluster
            page = await StatusReads(store).sessions(SessionQuery(), 0)
            assert [r["session_id"] for r in page.rows] == ["s0", "s1"]
            assert [r["session_id"] for r in (await StatusReads(store).revisions("s1", 0))[0][:1]] == ["s1"]
        await a.shutdown()
        await b.shutdown()

    asyncio.run(first_lives())
    a, b = Store(tmp_path / "a", shared=url), Store(tmp_path / "b", shared=url)
    try:
        assert set(a.recovery().pending) == {"a-work"} and set(b.recovery().pending) == {"b-work"}
        assert a.recovery().evaluated == {("s0", 1)} and b.recovery().evaluated == {("s1", 1)}
        assert _count(url, "SELECT COUNT(*) FROM results") == 2
    finally:
        asyncio.run(a.shutdown())
        asyncio.run(b.shutdown())


def test_a_bad_shared_url_is_refused_naming_the_setting(tmp_path: Path, postgres_server: Postgres) -> None:  # noqa: F811
    missing = postgres_server.url().rsplit("/", 1)[0] + "/no_such_database"
    try:
        Store(tmp_path, shared=missing)
    except RuntimeError as err:
        assert str(err).startswith("storage.shared: cannot open the shared store at postgresql://")
        assert "no_such_database" in str(err) and "skillgauge migrate" in str(err)
    else:
        raise AssertionError("a store opened on a database that does not exist")


def test_a_dead_replicas_exports_are_leased_by_another_once_its_lease_lapses(
    postgres_server: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = postgres_server.url()

    async def run() -> None:
        a = Store(tmp_path / "a", shared=url, lease_seconds=0.5)
        b = Store(tmp_path / "b", shared=url, lease_seconds=0.5)
        from_a, from_b = SpoolOutbox(a, "traces"), SpoolOutbox(b, "traces")
        try:
            await from_a.put([Entry(k, k.encode(), 1.0) for k in "xyz"])
            taken = await from_a.peek(10)  # a sends them, and dies before the downstream answers
            assert [e.key for e in taken] == ["x", "y", "z"]
            assert await from_b.peek(10) == []  # leased to a, alive or not, until the lease lapses
            deadline = time.monotonic() + 10
            while not (took_over := await from_b.peek(10)):
                assert time.monotonic() < deadline, "b never took a's entries over"
                await asyncio.sleep(0.05)
            assert took_over == taken
            assert await from_a.peek(10) == []  # b holds them now
            await from_b.ack(e.key for e in took_over)
            assert len(from_b) == 0 == _count(url, "SELECT COUNT(*) FROM outbox")
        finally:
            await a.shutdown()
            await b.shutdown()

    asyncio.run(run())


def test_a_shared_write_that_fails_fails_alone(postgres_server: Postgres, tmp_path: Path) -> None:  # noqa: F811
    url = postgres_server.url()

    def bad(db: Any) -> None:
        db.execute("INSERT INTO state (name, value) VALUES ('bad', 1)")
        raise ValueError("a bad write")

    def good(db: Any) -> None:
        db.execute("INSERT INTO state (name, value) VALUES ('good', 2)")

    async def run() -> list[tuple[Any, ...]]:
        store = Store(tmp_path, shared=url)
        try:
            with pytest.raises(ValueError):
                await store.transact(bad)  # alone in its transaction
            together = await asyncio.gather(store.transact(bad), store.transact(good), return_exceptions=True)
            assert isinstance(together[0], ValueError) and together[1] is None
            names: list[tuple[Any, ...]] = await store.transact(
                lambda db: db.rows("SELECT name FROM state WHERE name IN ('bad', 'good')")
            )
            return names
        finally:
            await store.shutdown()

    assert asyncio.run(run()) == [("good",)]
