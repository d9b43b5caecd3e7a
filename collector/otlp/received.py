"""An OTLP Export request as it travels the chain, and what became of its items."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from google.protobuf.message import Message

Signal = Literal["traces", "logs"]


@dataclass(slots=True)
class Accepted:
    """What became of one request's items: how many were taken, why the rest were not."""

    accepted: int = 0
    rejected: int = 0
    message: str = ""
    over_max_open: int = 0  # of ``rejected``: spans that would have opened a session past the cap
    uncorrelated: int = 0  # of ``rejected``: log records that name no session and no trace
    opens: int = 0  # sessions the accepted spans may open (promised at admission, until assembled)

    def take(self, other: Accepted) -> None:
        """Become what ``other`` says (a stage's finding, into the outcome a receiver answers)."""
        self.accepted, self.rejected, self.message = other.accepted, other.rejected, other.message
        self.over_max_open, self.opens = other.over_max_open, other.opens
        self.uncorrelated = other.uncorrelated

    def reject(self, why: str) -> None:
        self.rejected += 1
        if why not in self.message:
            self.message = f"{self.message}; {why}" if self.message else why


@dataclass(frozen=True, slots=True)
class Received:
    """One decoded request.  Stages fill ``outcome``; the receiver answers with it."""

    signal: Signal
    request: Message
    protocol: str  # grpc | http | replay | spool
    raw: bytes | None = None  # the request's protobuf bytes as received: spooled as they are
    outcome: Accepted = field(default_factory=Accepted)
    # Whose request it is: the tenant its bearer token names ("" by default), spooled with
    # it; sessions are kept apart per tenant.
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class Spooled:
    """A received request once the store holds it, under its request id."""

    received: Received
    request_id: int
