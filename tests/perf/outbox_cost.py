"""What a put and an ack of the SQLite outbox cost with a backlog waiting, as in an exporter
outage: ``python tests/perf/outbox_cost.py [--waiting 100000]``.

Fills one channel with ``--waiting`` entries, then times 300 rounds of a 10-entry put and a
10-entry ack, each awaited (wall time; the writer thread does the work).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from collector.export.outbox import Entry, SpoolOutbox
from collector.state.facade import Store

ROUNDS = 300


async def measure(waiting: int) -> float:
    """Milliseconds a put and an ack, with ``waiting`` entries in the outbox."""
    with tempfile.TemporaryDirectory() as tmp:
        spool = Store(Path(tmp), outbox_capacity=waiting + 10 * ROUNDS)
        outbox = SpoolOutbox(spool, "traces")
        try:
            for start in range(0, waiting, 500):
                batch = range(start, min(start + 500, waiting))
                await outbox.put([Entry(f"old-{i}", b"x" * 300, 0.0) for i in batch])
            began = time.perf_counter()
            for n in range(ROUNDS):
                await outbox.put([Entry(f"new-{n}-{i}", b"x" * 300, 0.0) for i in range(10)])
                await outbox.ack([f"old-{n * 10 + i}" for i in range(10)])
            return (time.perf_counter() - began) / ROUNDS * 1e3
        finally:
            await spool.shutdown()


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--waiting", type=int, default=100_000)
    opts = args.parse_args()
    print(f"{opts.waiting} entries waiting: {asyncio.run(measure(opts.waiting)):.2f} ms a put and an ack")


if __name__ == "__main__":
    main()
