"""Open sessions across replicas sharing one real PostgreSQL (``collector.status.cluster``),
started for this module: each beat writes what opened, changed or closed since the last; a
replica reads the others' whose beat has not lapsed, in the listing's shape, naming each
replica; a dead replica's rows stop counting once its beat lapses and go later."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.state.facade import Store
from collector.status.cluster import FORGET_AFTER, OpenAcross, merged


def _open(session_id: str, spans: int, closes_in: float = 60.0, tenant: str = "") -> dict[str, Any]:
    return {
        "session_id": session_id,
        "tenant": tenant,
        "revision": 1,
        "spans": spans,
        "skill_loads": 0,
        "idle_seconds": 1.0,
        "closes_in_seconds": closes_in,
        "closes_by": "idle_timeout",
    }


def test_replicas_see_each_others_open_sessions_until_a_beat_lapses(
    postgres_server: Postgres,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = postgres_server.url()
    now = [1000.0]

    async def run() -> None:
        a = Store(tmp_path / "a", shared=url, replica="a", lease_seconds=30)
        b = Store(tmp_path / "b", shared=url, replica="b", lease_seconds=30)
        seen_by_a, seen_by_b = OpenAcross(a, clock=lambda: now[0]), OpenAcross(b, clock=lambda: now[0])

        async def stored() -> list[tuple[Any, ...]]:
            return sorted(await a.transact(lambda db: db.rows("SELECT replica, session, spans FROM open_sessions")))

        try:
            await seen_by_a.beat([_open("s1", 3), _open("s2", 5, tenant="acme")])
            await seen_by_b.beat([_open("s3", 1, closes_in=10.0)])
            await seen_by_a.beat([_open("s1", 4), _open("s2", 5, tenant="acme")])  # s1 grew
            assert await stored() == sorted([("a", "s1", 4), ("a", "acme\x1fs2", 5), ("b", "s3", 1)])
            await seen_by_b.beat([])  # s3 closed
            assert sorted((r["replica"], r["session_id"], r["spans"]) for r in seen_by_b.rows(None, "limits")) == [
                ("a", "s1", 4),
                ("a", "s2", 5),
            ]
            assert [r["session_id"] for r in seen_by_b.rows("acme", "limits")] == ["s2"]
            now[0] += 5
            (row,) = seen_by_b.rows("", "limits")
            assert row == {
                **_open("s1", 4),
                "idle_seconds": 6.0,
                "closes_in_seconds": 55.0,
                "also_closed_by": "limits",
                "replica": "a",
            }
            mine = [{**_open("s9", 1, closes_in=30.0), "replica": "b"}]
            assert [r["session_id"] for r in merged(mine, seen_by_b.rows(None, "limits"))] == ["s9", "s1", "s2"]
            await seen_by_a.beat([_open("s1", 4), _open("s2", 5, tenant="acme")])
            now[0] += 31  # a beats no more: its sessions stop counting
            await seen_by_b.beat([])
            assert seen_by_b.rows(None, "limits") == []
            assert len(await stored()) == 2  # kept a while (a may come back)
            now[0] += FORGET_AFTER * 30
            await seen_by_b.beat([])
            assert await stored() == []
        finally:
            await a.shutdown()
            await b.shutdown()

    asyncio.run(run())
