"""The judge seam: a request in, a verdict reply (or a classified failure) out.

``Judge`` is a one-method protocol so that tests and other providers can stand in for
Anthropic (``evaluators.judge.testing.FakeJudge``; ``collector.evaluate.anthropic`` is the
real one).  Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# Why a judge call produced no reply.  Each maps to an ``error`` result reason and to a
# ``skillgauge_judge_requests`` outcome.
FailureKind = Literal["timeout", "rate_limited", "overloaded", "error"]
FAILURE_REASONS: dict[FailureKind, str] = {
    "timeout": "judge_timeout",
    "rate_limited": "judge_rate_limited",
    "overloaded": "judge_overloaded",
    "error": "judge_error",
}

# A reply that stopped without a verdict (``JudgeReply.stopped``) -> its ``error`` result
# reason.  Not retried: the same request would stop the same way.
STOP_REASONS: dict[str, str] = {"refused": "judge_refused", "truncated": "judge_truncated"}

VERDICT_TOOL = "record_verdict"  # the forced tool's name, on models without structured outputs


@dataclass(frozen=True, slots=True)
class Block:
    """One text block of the prompt.  ``cache`` marks the end of a cacheable prefix."""

    text: str
    cache: bool = False


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    evaluation: str
    model: str
    system: tuple[Block, ...]
    content: tuple[Block, ...]  # the one user message
    tool_schema: dict[str, Any]  # the verdict's JSON schema (structured output or tool input)
    tool_description: str
    max_tokens: int
    context_truncated: bool = False
    nonces: tuple[str, ...] = ()  # the fence delimiters used in this request

    def chars(self) -> int:
        return sum(len(b.text) for b in (*self.system, *self.content)) + len(str(self.tool_schema))


@dataclass(frozen=True, slots=True)
class JudgeReply:
    model: str
    tool_input: dict[str, Any] | None  # the verdict object; None: the reply holds none
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    latency_s: float = 0.0
    stop_reason: str | None = None
    text: str = ""
    stopped: str = ""  # a key of STOP_REASONS: the reply stopped before any verdict
    problem: str = ""  # why ``tool_input`` is None, when the reply says


@dataclass
class JudgeFailure(Exception):
    """A call that produced no reply after the retries the policy allows."""

    kind: FailureKind
    message: str
    attempts: int = 1
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"{self.kind}: {self.message} (after {self.attempts} attempt{'s' if self.attempts != 1 else ''})"
        )

    @property
    def reason(self) -> str:
        return FAILURE_REASONS[self.kind]

    @property
    def transient(self) -> bool:
        """The judge could not be reached or had no capacity (a timeout, 429, 529, a 5xx or
        a failed connection): the same request may well succeed later.  A judge says so for
        ``error`` failures with ``extra["transient"]``; without it, an ``error`` is final."""
        if self.kind != "error":
            return True
        return bool(self.extra.get("transient", False))


class Judge(Protocol):
    """Sends one request; retries transient failures itself; raises ``JudgeFailure``."""

    async def complete(self, request: JudgeRequest) -> JudgeReply: ...

    async def close(self) -> None: ...


class JudgeObserver(Protocol):
    """Where judge accounting goes (the collector points it at Prometheus)."""

    def request(self, model: str, outcome: str, latency_s: float) -> None:
        """One API call finished: ok | unparseable | timeout | rate_limited | overloaded | error."""

    def billed(self, model: str, kind: str, tokens: int) -> None:
        """Tokens billed, by kind: input | output | cache_read | cache_write."""

    def spent(self, model: str, usd: float) -> None: ...


class NullObserver:
    def request(self, model: str, outcome: str, latency_s: float) -> None:
        pass

    def billed(self, model: str, kind: str, tokens: int) -> None:
        pass

    def spent(self, model: str, usd: float) -> None:
        pass
