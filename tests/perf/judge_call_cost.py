"""CPU a judge call costs the process that makes it: ``python tests/perf/judge_call_cost.py``.

Starts the fake Messages API in a process of its own, then makes the same call many times,
16 at a time, each way:

  sdk        ``AsyncAnthropic().messages.create``: the SDK's defaults (httpx, reply models)
  aiohttp    the same, with the SDK's aiohttp transport
  judge      ``AnthropicJudge.complete``, what skillgauge makes (aiohttp transport, the raw
             reply read with orjson)

and prints the process CPU time per call (``time.process_time``) and the calls per second.
The figures drift with the machine; compare the lines of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from collector.evaluate.anthropic import AnthropicJudge, message_params  # noqa: E402
from collector.evaluate.retry import RetryPolicy  # noqa: E402
from evaluators.judge.base import Block, JudgeRequest  # noqa: E402
from evaluators.judge.verdicts import SELECTION  # noqa: E402

_SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fake_anthropic import FakeAnthropic
print(FakeAnthropic().start().port, flush=True)
time.sleep(3600)
"""

SCHEMA = SELECTION.schema()
# About the size of a skill_instruction_following prompt: rubric, skill body, session.
REQUEST = JudgeRequest(
    "skill_instruction_following",
    "claude-sonnet-5-5",
    (Block("You are an impartial judge. " * 120, cache=True),),
    (Block("skill body line\n" * 200, cache=True), Block("session transcript line\n" * 250)),
    SCHEMA,
    "Record your verdict.",
    2048,
)


async def measure(name: str, call: Callable[[], Awaitable[Any]], calls: int, concurrency: int = 16) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one() for _ in range(50)))  # connections open, caches warm
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(one() for _ in range(calls)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(f"{name:8} {1000 * cpu / calls:6.3f} ms CPU a call, {calls / wall:6.0f} calls/s")


async def run(base_url: str, calls: int, rounds: int) -> None:
    params = message_params(REQUEST)
    sdk = anthropic.AsyncAnthropic(api_key="bench", base_url=base_url, max_retries=0)
    aio = anthropic.AsyncAnthropic(
        api_key="bench", base_url=base_url, max_retries=0, http_client=anthropic.DefaultAioHttpClient()
    )
    judge = AnthropicJudge(api_key="bench", base_url=base_url, timeout=30.0, retry=RetryPolicy(0, 0.1, 1.0, 1.0))
    for _ in range(rounds):  # alternated, so that a drift of the machine hits every way alike
        await measure("sdk", lambda: sdk.messages.create(**params), calls)
        await measure("aiohttp", lambda: aio.messages.create(**params), calls)
        await measure("judge", lambda: judge.complete(REQUEST), calls)
    await sdk.close()
    await aio.close()
    await judge.close()


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--calls", type=int, default=1000, help="calls per measurement (default 1000)")
    args.add_argument("--rounds", type=int, default=2, help="rounds of the three ways (default 2)")
    opts = args.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(HERE.parent)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        asyncio.run(run(f"http://127.0.0.1:{port}", opts.calls, opts.rounds))
    finally:
        server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
