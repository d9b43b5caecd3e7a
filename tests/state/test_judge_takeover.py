"""Judge work leased in the shared store (``judge_revisions``), on SQLite and on a real
PostgreSQL: a live replica's renewals keep its revisions; once its lease lapses another
replica takes the revision over with the evidence, the verdicts already committed and the
waiting work's times; the coverage commit ends the lease; a replica restarting lets go of
what it had taken over.  And the evidence survives its trip through the store whole."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.evaluate.evidence_codec import decode, encode
from collector.evaluate.pending import StoredPending
from collector.evaluate.takeover import Takeover
from collector.state.facade import Store
from collector.state.types import encode_record
from evaluators.evidence import (
    Because,
    Catalog,
    CatalogEntry,
    Session,
    SkillLoad,
    ToolCall,
    Turn,
    UnreadableItem,
)


def _session() -> Session:
    """A session with every field set to something other than its default."""
    catalog = Catalog()
    catalog.advertise([CatalogEntry("pdf", "Read PDFs", "/skills/pdf"), CatalogEntry("csv")], "xml")
    catalog.truncated = 2
    return Session(
        session_id="taken-over",
        revision=3,
        framework="claude_code",
        turns=[Turn("summarise the pdf", "s1", "t1", 10, "done", "span")],
        tool_calls=[ToolCall("Read", "s2", "t1", 11, "c1", '{"p": 1}', "text", None, "pdf", True, True, 12)],
        skill_loads=[
            SkillLoad(
                "pdf", "loaded", "file_read", "s2", "t1", 11, "# PDF\n", "/skills/pdf/SKILL.md", None, "c1", 4
            )
        ],
        catalog=catalog,
        expected_skills=["pdf"],
        expected_because={"pdf": Because("user_message", "pdf", "pdf", "turn 1")},
        content_capture="present",
        first_agent_span=("t1", "s0"),
        span_count=7,
        close_reason="idle_timeout",
        unreadable=[UnreadableItem("span", "t1", "s9", "bad_value", "nope")],
        unreadable_count=3,
        tenant="acme",
        key_source="configured:session.id",
    )


def test_the_evidence_comes_back_whole() -> None:
    session = _session()
    assert decode(encode(session)) == session
    assert decode(encode(Session("bare"))) == Session("bare")
    with pytest.raises(ValueError, match="not a session's evidence"):
        decode(b"not zlib")


class FakeRunner:
    """What a takeover hands a revision to: remembers each."""

    def __init__(self) -> None:
        self.recovered: dict[str, dict[str, Any]] = {}
        self.pending_since: dict[str, tuple[float, int]] = {}
        self.resumed: list[tuple[Session, float]] = []

    def spare(self) -> int:
        return 10

    def resume(self, session: Session, closed_at: float) -> Awaitable[None]:
        self.resumed.append((session, closed_at))
        return asyncio.sleep(0)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest) -> str | None:
    if request.param == "sqlite":
        return None
    server: Postgres = request.getfixturevalue("postgres_server")
    return server.url()


def test_a_lapsed_revision_is_taken_over_once_with_its_evidence_and_verdicts(
    shared: str | None, tmp_path: Path
) -> None:
    # On SQLite the replicas take turns on one data directory (one writer); on PostgreSQL
    # each has its own.
    where = {"a": tmp_path / "a", "b": tmp_path / ("a" if shared is None else "b")}
    session, now = _session(), time.time()
    work = [("key-omission", session.key, session.revision, "skill_omission", now - 5)]

    async def a_queues_and_dies() -> None:
        a = Store(where["a"], shared=shared, replica="a", lease_seconds=30)
        StoredPending(a).pending_add(work, session, now - 9)
        await a.save_result(
            "key-selection", session.key, session.revision, {"evaluation": "skill_selection_accuracy"}
        )
        a_runner = FakeRunner()
        assert await Takeover(a, a_runner, clock=lambda: now + 20).beat() == 0  # renews to now + 50
        await a.shutdown()

    asyncio.run(a_queues_and_dies())
    runner = FakeRunner()

    async def b_takes_over() -> None:
        b = Store(where["b"], shared=shared, replica="b", lease_seconds=30)
        takeover = Takeover(b, runner, clock=lambda: now + 49)
        try:
            assert await takeover.beat() == 0  # a's lease runs to now + 50
            takeover = Takeover(b, runner, clock=lambda: now + 51)
            assert await takeover.beat() == 1
            assert await takeover.beat() == 0  # b's own now: not taken twice
            ((resumed, closed_at),) = runner.resumed
            assert resumed == session and closed_at == pytest.approx(now - 9)
            assert set(runner.recovered) == {"key-selection"}  # the verdict a paid for
            assert runner.pending_since == {"key-omission": (pytest.approx(now - 5), 0)}
            rows = await b.transact(
                lambda db: db.rows("SELECT lease_owner, lease_expires FROM judge_revisions")
            )
            assert [(owner, float(until)) for owner, until in rows] == [("b", pytest.approx(now + 81))]
        finally:
            await b.shutdown()

    asyncio.run(b_takes_over())

    async def a_returns_and_b_restarts() -> None:
        a = Store(where["a"], shared=shared, replica="a", lease_seconds=30)
        try:  # a, back within b's lease: its renewal holds nothing, its claim takes nothing
            assert await Takeover(a, FakeRunner(), clock=lambda: now + 60).beat() == 0
        finally:
            await a.shutdown()
        b = Store(where["b"], shared=shared, replica="b", lease_seconds=30)
        try:  # what b had taken over is let go at its restart: anyone's (its own takeover's)
            assert [
                owner
                for _, owner in await b.transact(
                    lambda db: db.rows("SELECT key, lease_owner FROM judge_revisions")
                )
            ] == [None]
            again = FakeRunner()
            assert await Takeover(b, again, clock=lambda: now + 61).beat() == 1
            line = encode_record(
                {"session_id": session.session_id, "revision": session.revision, "closed_at": now}
            )
            await b.save_coverage([(session.key, session.revision, [], line)])
            assert await b.transact(lambda db: db.rows("SELECT key FROM judge_revisions")) == []
        finally:
            await b.shutdown()

    asyncio.run(a_returns_and_b_restarts())
