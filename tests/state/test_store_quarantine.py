"""A restart over a spool it cannot fully read: what cannot be replayed is set aside, the rest
replays, and the service starts."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.otlp.received import Received
from collector.receiver import decode
from collector.service import Chain
from collector.state.segments import HEADER_BYTES

NAMES = ("right_skill", "no_skill", "missing_skill")


def _config(tmp: Path) -> object:
    return parse({"storage": {"path": str(tmp)}, "sessions": {"idle_timeout": "1h"}})


async def _first_life(tmp: Path) -> None:
    chain = Chain(_config(tmp))  # type: ignore[arg-type]
    for name in NAMES:
        (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
        await chain.consume(Received("traces", request, "test"))
    await chain.sessions_stage.settle()
    await chain.store.shutdown()  # the sessions stay open: a restart replays all three


def test_a_request_that_is_not_otlp_any_more_is_quarantined_and_the_rest_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asyncio.run(_first_life(tmp_path))
    segment = tmp_path / "requests" / "00000001.seg"
    data = bytearray(segment.read_bytes())
    (second,) = trace_requests(FRAMEWORKS / "strands" / "no_skill.traces.jsonl")
    (first,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    start = 2 * HEADER_BYTES + len(first.SerializeToString())  # request 2's bytes, after its frame header
    length = len(second.SerializeToString())
    data[start : start + length] = b"\xff" * length  # request 2: same length, not protobuf
    segment.write_bytes(bytes(data))

    async def second_life() -> tuple[list[str], float]:
        chain = Chain(_config(tmp_path))  # type: ignore[arg-type]
        await chain.start()  # must not raise
        open_keys = sorted(s.key for s in chain.sessions_stage.assembler.open_sessions())
        chain.refresh()
        quarantined = chain.registry.get_sample_value(
            "skillgauge_spool_quarantined_total", {"reason": "undecodable"}
        )
        await chain.store.shutdown()
        return open_keys, quarantined or 0.0

    with caplog.at_level(logging.WARNING):
        open_keys, quarantined = asyncio.run(second_life())
    assert open_keys == ["strands-missing_skill-0001", "strands-right_skill-0001"]
    assert quarantined == 1
    assert "spooled request 2 is undecodable and was quarantined" in caplog.text
    assert (tmp_path / "quarantine" / "2.traces.binpb").read_bytes() == b"\xff" * length


def test_a_request_whose_segment_is_gone_is_quarantined_and_the_service_starts(tmp_path: Path) -> None:
    asyncio.run(_first_life(tmp_path))
    segment = tmp_path / "requests" / "00000001.seg"
    (first,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    torn = 2 * HEADER_BYTES + len(first.SerializeToString()) + 10  # torn after request 1
    segment.write_bytes(segment.read_bytes()[:torn])

    async def second_life() -> tuple[list[str], dict[str, int]]:
        chain = Chain(_config(tmp_path))  # type: ignore[arg-type]
        await chain.start()
        open_keys = [s.key for s in chain.sessions_stage.assembler.open_sessions()]
        await chain.store.shutdown()
        return open_keys, dict(chain.store.faults.quarantined)

    open_keys, quarantined = asyncio.run(second_life())
    assert open_keys == ["strands-right_skill-0001"]
    assert quarantined == {"unreadable": 2, "undecodable": 0}
    assert sorted(p.name for p in (tmp_path / "quarantine").iterdir()) == ["2.traces.binpb", "3.traces.binpb"]


def test_a_spooled_request_with_text_that_is_not_utf8_replays_as_it_was_taken(tmp_path: Path) -> None:
    """The receivers take such a request (``wire.parse``) and spool its bytes as they came; a
    restart reads them the same way instead of quarantining them."""
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="tool.output").value.string_value = "BAD-TXT"
    raw = request.SerializeToString().replace(b"BAD-TXT", b"BAD\xe2\x80TX")
    received = Received("traces", decode.decode("traces", raw, "protobuf"), "test", raw=raw)

    async def first_life() -> int:
        chain = Chain(_config(tmp_path))  # type: ignore[arg-type]
        await chain.consume(received)
        await chain.sessions_stage.settle()
        (session,) = chain.sessions_stage.assembler.open_sessions()
        spans = session.spans
        await chain.store.shutdown()
        return spans

    async def second_life() -> tuple[list[tuple[str, int]], float]:
        chain = Chain(_config(tmp_path))  # type: ignore[arg-type]
        await chain.start()
        opened = [(s.key, s.spans) for s in chain.sessions_stage.assembler.open_sessions()]
        chain.refresh()
        quarantined = chain.registry.get_sample_value(
            "skillgauge_spool_quarantined_total", {"reason": "undecodable"}
        )
        await chain.store.shutdown()
        return opened, quarantined or 0.0

    spans = asyncio.run(first_life())
    assert spans == len(request.resource_spans[0].scope_spans[0].spans) and received.outcome.rejected == 0
    assert asyncio.run(second_life()) == ([("strands-right_skill-0001", spans)], 0.0)
