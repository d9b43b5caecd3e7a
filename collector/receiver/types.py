"""What a receiver is built from: the chain's first stage, a way to count its answers, and
an admission check made before the request is read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from collector.component import Consumer
from collector.otlp.received import Received

Intake = Consumer[Received]  # takes one decoded request; fills its ``outcome``
OnAnswer = Callable[[str, str, str], None]  # (signal, outcome, reason): count the answer
# Raises ``Retryable`` when the chain cannot take a request from the tenant now (after a
# bounded wait for room).
Admit = Callable[[str], Awaitable[None]]


async def admits_all(tenant: str = "") -> None:
    """An ``Admit`` that never refuses."""
