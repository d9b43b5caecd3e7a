"""What every stage of the chain is, and the two kinds of failure a stage may raise.

receive -> spool -> sessions (detect) -> evaluate -> record -> export: each stage is a
``Consumer`` holding the next one.  A receiver holds the first and translates the errors
below into OTLP answers; no other code knows gRPC or HTTP status codes.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

T_contra = TypeVar("T_contra", contravariant=True)


class Consumer(Protocol[T_contra]):
    """One stage.  Lifecycle: built, then ``consume`` any number of times, then ``shutdown``
    once; ``shutdown`` must be safe without any ``consume`` (a stage starts on first use)."""

    async def consume(self, item: T_contra) -> None:
        """Take one item.  Returns once the item is this stage's (queued or passed on);
        raises ``Permanent`` or ``Retryable`` if it was not taken."""
        ...

    async def shutdown(self, timeout: float) -> None:
        """Finish what was taken (within ``timeout`` seconds), pass it on, and stop."""
        ...


class Permanent(Exception):
    """The item can never be taken: the sender must not retry it (bad data)."""


class Retryable(Exception):
    """The item cannot be taken now (a bound is reached, storage failed); retry after
    ``retry_after`` seconds.  Nothing of it was kept.  ``reason`` is a short, fixed code for
    the rejected-requests metric: ``backpressure`` (a bound) or ``storage_error`` (a write
    failed, e.g. a full disk)."""

    def __init__(self, message: str, retry_after: float = 5.0, reason: str = "backpressure") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.reason = reason
