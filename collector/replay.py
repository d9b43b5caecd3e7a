"""``skillgauge replay``: evaluate recorded OTLP as if it had just been received.

Reads OTLP/JSON (one request per file, or one per line as the Collector's file exporter
writes), binary ``ExportTraceServiceRequest`` files (``.binpb``, ``.pb``) and binary logs
requests (``.logs.binpb``), and directories of them.  A file that cannot be read is
reported with its name and line, and the rest is still evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import Message

from collector.component import Retryable
from collector.config import Config
from collector.otlp.received import Received
from collector.receiver import decode
from collector.receiver.errors import InvalidRequest, ReceiveError
from collector.service import Chain
from collector.state.facade import Store
from evaluators.result import Coverage

SUFFIXES = (".json", ".jsonl", ".binpb", ".pb")


@dataclass(repr=False)
class ReplayOutcome:
    coverages: list[Coverage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # any of these: replay exits 1
    notes: list[str] = field(default_factory=list)  # said on stderr; the input was still whole

    def __repr__(self) -> str:
        # Counts, not contents: ``asyncio.run`` (3.11) formats the finished main task, result
        # included, as it restores SIGINT handling, and every session's coverage took ~1 s to
        # format for 8,000 sessions.
        return (
            f"ReplayOutcome({len(self.coverages)} coverages, {len(self.problems)} problems, "
            f"{len(self.notes)} notes)"
        )


def input_files(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
        else:
            yield path


@dataclass
class Progress:
    """How far a replay has got, for a progress line."""

    files: int = 0  # files finished
    files_total: int = 0
    bytes: int = 0  # bytes of the input read so far
    bytes_total: int = 0
    requests: int = 0
    sessions: int = 0  # sessions seen (open now or closed)


def requests_in(path: Path) -> Iterator[tuple[str, Received | ReceiveError]]:
    """(where, request or the error that file position produced)."""
    for where, item, _size in sized_requests_in(path):
        yield where, item


def sized_requests_in(path: Path) -> Iterator[tuple[str, Received | ReceiveError, int]]:
    """(where, request or error, bytes of the file it took)."""
    name = path.name
    if name.endswith((".binpb", ".pb")):
        signal: decode.Signal = "logs" if name.endswith((".logs.binpb", ".logs.pb")) else "traces"
        body = path.read_bytes()
        try:
            # The bytes go with the request, as a receiver hands them on: spooled as they are
            # (not serialised again) and read in place by detection.
            request = decode.decode(signal, body, "protobuf")
            yield str(path), Received(signal, request, "replay", raw=body), len(body)
        except ReceiveError as error:
            yield str(path), error, len(body)
        return
    text = path.read_bytes()
    try:
        whole = json.loads(text)
        chunks: list[tuple[str, bytes]] = [(str(path), text)] if isinstance(whole, dict) else []
        if not isinstance(whole, dict):
            yield str(path), InvalidRequest("top level must be an OTLP/JSON object"), len(text)
    except ValueError:
        chunks = [(f"{path}:{n}", line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    for where, chunk in chunks:
        try:
            yield where, Received(*_json_request(chunk), "replay"), len(chunk) + 1
        except ReceiveError as error:
            yield where, error, len(chunk) + 1


def _json_request(chunk: bytes) -> tuple[decode.Signal, Message]:
    head = chunk[:4096]
    signal: decode.Signal = "logs" if b"resourceLogs" in head or b"resource_logs" in head else "traces"
    return signal, decode.decode(signal, chunk, "json")


async def replay(
    paths: list[str], config: Config, progress: Callable[[Progress], None] | None = None
) -> ReplayOutcome:
    """Evaluate the files through the same chain ``serve`` runs, with a store in memory.

    ``progress`` is called after every request, after every file and once evaluation ended,
    with the same ``Progress``, updated."""
    chain = Chain(config, store=Store.in_memory())
    chain.recorder.keep_closed = True
    chain.sessions_stage.assemble_on_settle = True  # the records depend on the input alone
    outcome = ReplayOutcome()
    files = list(input_files(paths))
    if not files:
        outcome.problems.append(
            f"no OTLP files found in {', '.join(paths)} (looked for {', '.join(SUFFIXES)})"
        )
    done = Progress(files_total=len(files), bytes_total=sum(_size(p) for p in files))

    def report() -> None:
        if progress is not None:
            done.sessions = chain.sessions_stage.assembler.open_count + len(chain.recorder.closed)
            progress(done)

    for path in files:
        end = done.bytes + _size(path)
        try:
            for where, item, size in sized_requests_in(path):
                done.bytes = min(done.bytes + size, end)
                done.requests += 1
                report()
                if isinstance(item, ReceiveError):
                    outcome.problems.append(f"{where}: {item}")
                    continue
                try:
                    await _take(chain, item)
                except Retryable as err:
                    outcome.problems.append(f"{where}: not taken: {err}")
                    continue
                accepted = item.outcome
                if accepted.rejected > accepted.uncorrelated:
                    outcome.problems.append(f"{where}: {accepted.rejected} rejected: {accepted.message}")
                elif accepted.uncorrelated:
                    # Records no session can use (a harness's process-level events): the rest
                    # of the input is whole, so this is said, not failed on.
                    outcome.notes.append(f"{where}: {accepted.uncorrelated} not used: {accepted.message}")
        except OSError as err:
            outcome.problems.append(f"{path}: cannot read ({err.strerror})")
        done.files += 1
        done.bytes = end
        report()
    await chain.sessions_stage.settle()
    await chain.sessions_stage.close_all("end_of_input")
    await chain.drain()
    await chain.runner.close()
    report()
    outcome.coverages = chain.recorder.closed
    return outcome


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def _take(chain: Chain, item: Received) -> None:
    """``item`` into the chain.  Where a network sender would be refused and retry (and serve
    would log the refusal), replay first waits for the requests waiting to be assembled, then
    for the judge work (``judge.max_queue``); a bound that waiting cannot lift
    (``sessions.max_open``) still refuses the item (``Retryable``)."""
    try:
        chain.sessions_stage.admit()
        chain.runner.admit()
    except Retryable:
        await chain.sessions_stage.settle()
        await chain.runner.room()
    await chain.consume(item)
