"""``skillgauge replay``: evaluate recorded OTLP as if it had just been received.

Reads OTLP/JSON (one request per file, or one per line as the Collector's file exporter
writes), binary ``ExportTraceServiceRequest`` files (``.binpb``, ``.pb``) and binary logs
requests (``.logs.binpb``), and directories of them.  A file that cannot be read is
reported with its name and line, and the rest is still evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import Message

from collector.component import Retryable
from collector.config import Config
from collector.otlp.received import Received
from collector.receiver import decode
from collector.receiver.errors import InvalidRequest, ReceiveError
from collector.service import Chain
from collector.state.store import MemorySpool
from evaluators.result import Coverage

SUFFIXES = (".json", ".jsonl", ".binpb", ".pb")


@dataclass
class ReplayOutcome:
    coverages: list[Coverage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # any of these: replay exits 1
    notes: list[str] = field(default_factory=list)  # said on stderr; the input was still whole
    items_rejected: int = 0


def input_files(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
        else:
            yield path


def requests_in(path: Path) -> Iterator[tuple[str, Received | ReceiveError]]:
    """(where, request or the error that file position produced)."""
    name = path.name
    if name.endswith((".binpb", ".pb")):
        signal: decode.Signal = "logs" if name.endswith((".logs.binpb", ".logs.pb")) else "traces"
        try:
            yield str(path), Received(signal, decode.decode(signal, path.read_bytes(), "protobuf"), "replay")
        except ReceiveError as error:
            yield str(path), error
        return
    text = path.read_bytes()
    try:
        whole = json.loads(text)
        chunks: list[tuple[str, bytes]] = [(str(path), text)] if isinstance(whole, dict) else []
        if not isinstance(whole, dict):
            yield str(path), InvalidRequest("top level must be an OTLP/JSON object")
    except ValueError:
        chunks = [(f"{path}:{n}", line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    for where, chunk in chunks:
        try:
            yield where, Received(*_json_request(chunk), "replay")
        except ReceiveError as error:
            yield where, error


def _json_request(chunk: bytes) -> tuple[decode.Signal, Message]:
    head = chunk[:4096]
    signal: decode.Signal = "logs" if b"resourceLogs" in head or b"resource_logs" in head else "traces"
    return signal, decode.decode(signal, chunk, "json")


async def replay(paths: list[str], config: Config) -> ReplayOutcome:
    """Evaluate the files through the same chain ``serve`` runs, with a store in memory."""
    chain = Chain(config, store=MemorySpool())
    chain.recorder.keep_closed = True
    outcome = ReplayOutcome()
    files = list(input_files(paths))
    if not files:
        outcome.problems.append(
            f"no OTLP files found in {', '.join(paths)} (looked for {', '.join(SUFFIXES)})"
        )
    for path in files:
        try:
            for where, item in requests_in(path):
                if isinstance(item, ReceiveError):
                    outcome.problems.append(f"{where}: {item}")
                    continue
                try:
                    await _take(chain, item)
                except Retryable as err:
                    outcome.problems.append(f"{where}: not taken: {err}")
                    continue
                accepted = item.outcome
                outcome.items_rejected += accepted.rejected
                if accepted.rejected > accepted.uncorrelated:
                    outcome.problems.append(f"{where}: {accepted.rejected} rejected: {accepted.message}")
                elif accepted.uncorrelated:
                    # Records no session can use (a harness's process-level events): the rest
                    # of the input is whole, so this is said, not failed on.
                    outcome.notes.append(f"{where}: {accepted.uncorrelated} not used: {accepted.message}")
        except OSError as err:
            outcome.problems.append(f"{path}: cannot read ({err.strerror})")
    await chain.sessions.settle()
    await chain.sessions.close_all("end_of_input")
    await chain.drain()
    await chain.runner.close()
    outcome.coverages = chain.recorder.closed
    return outcome


async def _take(chain: Chain, item: Received) -> None:
    """``item`` into the chain; when a bound is reached, once more after the queue drains."""
    try:
        await chain.consume(item)
    except Retryable:
        await chain.sessions.settle()
        await chain.consume(item)
