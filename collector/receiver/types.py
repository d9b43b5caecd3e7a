"""The three callables a receiver is built from (the pipeline provides them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from collector.pipeline import Received
from collector.sessions.assembler import Accepted

Consume = Callable[[Received], Awaitable[Accepted]]  # take one decoded request
OnAnswer = Callable[[str, str, str], None]  # (signal, outcome, reason): count the answer
Admit = Callable[[], None]  # raises Backpressure when the pipeline cannot take a request now
