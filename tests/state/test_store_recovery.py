"""The SQLite spool across a restart, in process: what a second process finds."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.otlp.received import Received
from collector.service import Chain as Pipeline
from collector.sessions import stage
from collector.state.facade import Store
from collector.state.types import Closed, encode_record


def _config(tmp: Path) -> object:
    return parse({"storage": {"path": str(tmp)}, "sessions": {"idle_timeout": "1h"}})


async def _first_life(tmp: Path) -> None:
    pipeline = Pipeline(_config(tmp))  # type: ignore[arg-type]
    for name in ("right_skill", "no_skill"):
        (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
        await pipeline.consume(Received("traces", request, "test"))
    await pipeline.sessions_stage.settle()
    await pipeline.sessions_stage.close("strands-no_skill-0001", "end_attribute")
    await pipeline.drain()
    # no shutdown: the process "dies" with right_skill open; the writer thread is abandoned
    await asyncio.sleep(0.2)


async def _second_life(tmp: Path) -> Pipeline:
    pipeline = Pipeline(_config(tmp))  # type: ignore[arg-type]
    pipeline.recorder.keep_closed = True
    await pipeline.start()
    return pipeline


def test_open_sessions_are_rebuilt_and_evaluated_ones_are_not_evaluated_again(tmp_path: Path) -> None:
    asyncio.run(_first_life(tmp_path))
    recovery = Store(tmp_path).recovery()
    assert ("strands-no_skill-0001", 1) in recovery.evaluated

    async def check() -> None:
        pipeline = await _second_life(tmp_path)
        assert [s.key for s in pipeline.sessions_stage.assembler.open_sessions()] == [
            "strands-right_skill-0001"
        ]
        (open_session,) = pipeline.sessions_stage.assembler.open_sessions()
        assert open_session.spans == 6
        await pipeline.sessions_stage.close_all("shutdown")
        await pipeline.drain()
        assert [c.session.session_id for c in pipeline.recorder.closed] == ["strands-right_skill-0001"]
        await pipeline.store.shutdown()

    asyncio.run(check())


def test_a_new_revision_supersedes_the_old_results_which_stay_on_record(tmp_path: Path) -> None:
    async def run() -> list[tuple[int, int, int]]:
        pipeline = Pipeline(_config(tmp_path))  # type: ignore[arg-type]
        (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
        await pipeline.consume(Received("traces", request, "test"))
        await pipeline.sessions_stage.settle()
        await pipeline.sessions_stage.close("strands-right_skill-0001", "idle_timeout")
        await pipeline.drain()
        late = type(request)()
        late.CopyFrom(request)
        for rs in late.resource_spans:  # spans of the same session, new ones (a copy is not taken)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.span_id = bytes(reversed(span.span_id))
        await pipeline.consume(Received("traces", late, "test"))
        await pipeline.sessions_stage.settle()
        await pipeline.sessions_stage.close("strands-right_skill-0001", "idle_timeout")
        await pipeline.drain()
        await pipeline.store.shutdown()
        import sqlite3

        with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
            return list(
                db.execute(
                    "SELECT revision, json_extract(record, '$.revision'), json_array_length(record, '$.results') "
                    "FROM coverage ORDER BY revision"
                )
            )

    # Each revision's coverage line holds its own results; the first stays on record.
    (first, second) = asyncio.run(run())
    assert first[:2] == (1, 1) and second[:2] == (2, 2)
    assert first[2] > 0 and second[2] > 0


def test_judge_verdicts_of_an_earlier_revision_are_not_reused_once_a_later_one_is_evaluated(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        spool = Store(tmp_path)
        await spool.save_result("s|1|selection", "s", 1, {"score": 1.0})
        await spool.save_result("s|2|selection", "s", 2, {"score": 0.0})
        await spool.save_result("t|1|selection", "t", 1, {"score": 0.5})
        spool.record_closed(Closed("s", 3, "idle", 1, 1, ()))  # this replica's revision
        await spool.save_coverage([("s", 3, [encode_record({"score": 0.5})], encode_record({"spans": 2}))])
        await spool.shutdown()

    asyncio.run(run())
    recovery = Store(tmp_path).recovery()
    # s revisions 1 and 2 were superseded by the evaluated revision 3; t's verdict waits for reuse.
    assert recovery.results == {"t|1|selection": {"score": 0.5}}
    assert ("s", 3) in recovery.evaluated


def test_checkpoint_trims_requests_closed_records_and_old_results(tmp_path: Path) -> None:
    import sqlite3

    async def run() -> None:
        spool = Store(tmp_path)
        first = await spool.append("traces", b"a")
        second = await spool.append("traces", b"b")
        spool.record_closed(Closed("s", 1, "idle_timeout", first, first, ()))
        await spool.save_result("k", "s", 1, {"x": 1})
        await spool.save_coverage([("s", 1, [encode_record({"x": 1})], encode_record({"spans": 1}))])
        await spool.checkpoint(second, keep_results_for=3600)  # results are fresh: kept
        await spool.checkpoint(second, keep_results_for=-1)  # everything is older than "now + 1 s"
        await spool.shutdown()

    asyncio.run(run())
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        counts = {
            t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("spooled", "closed", "results", "coverage")
        }
    assert counts == {"spooled": 1, "closed": 0, "results": 0, "coverage": 0}


def test_retention_finds_expired_rows_through_an_index(tmp_path: Path) -> None:
    # Checked at every checkpoint against a week of coverage lines: a scan would read them all.
    import sqlite3

    from collector.state.verdicts import EXPIRE as _EXPIRE

    asyncio.run(Store(tmp_path).shutdown())  # creates the schema
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        for statement in _EXPIRE:
            plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}", (0.0,)))
            assert plan.startswith("SEARCH") and "INDEX" in plan, (statement, plan)


def test_a_long_replay_says_how_far_it_has_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")

    async def first_life() -> None:  # 450 requests, each a session of its own, left open
        store = Store(tmp_path)
        for n in range(450):
            copy = type(request)()
            copy.CopyFrom(request)
            for span in (s for rs in copy.resource_spans for ss in rs.scope_spans for s in ss.spans):
                span.trace_id = n.to_bytes(4, "big") + span.trace_id[4:]
                for kv in span.attributes:
                    if kv.key == "session.id":
                        kv.value.string_value = f"long-replay-{n}"
            await store.append("traces", copy.SerializeToString())
        await store.shutdown()

    async def second_life() -> int:
        pipeline = await _second_life(tmp_path)
        open_count = pipeline.sessions_stage.assembler.open_count
        await pipeline.store.shutdown()
        return open_count

    asyncio.run(first_life())
    monkeypatch.setattr(stage, "RECOVERY_LINE_EVERY", 0.0)  # a line each time one may come
    caplog.set_level(logging.INFO, logger="skillgauge")
    assert asyncio.run(second_life()) == 450
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("recovering from the spool")]
    assert [line.split(" requests")[0] for line in lines] == [
        "recovering from the spool: 200",
        "recovering from the spool: 400",
    ]
    assert "up to request 400; 400 sessions open so far" in lines[1]
