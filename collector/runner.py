"""Evaluate closed sessions and hand each finished account (``Coverage``) onwards.

``submit`` is called from the assembler's close callback and must not block: deterministic
evaluators run at once; evaluators that need a judge run as tasks, bounded, and ``drain``
waits for the ones in flight (shutdown, end of replay).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from evaluators import suite
from evaluators.evidence import Session
from evaluators.result import Coverage

Deliver = Callable[[Coverage, float], None]  # (coverage, seconds since the session closed)


class Runner:
    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._in_flight: set[asyncio.Task[None]] = set()

    def submit(self, session: Session) -> None:
        closed_at = time.monotonic()
        self._deliver(suite.evaluate(session), time.monotonic() - closed_at)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def drain(self, timeout: float = 30.0) -> None:
        if self._in_flight:
            await asyncio.wait(self._in_flight, timeout=timeout)
