"""When to retry a judge call and how long to wait: a pure policy, tested as a table.

Retried: 408, 409, 429, 529 and every 5xx, timeouts and connection errors.  A
``retry-after-ms`` or ``retry-after`` header (seconds or an HTTP date) sets the wait;
without one the wait doubles from ``backoff`` up to ``max_backoff``, with jitter.  A
retry-after longer than ``max_retry_after`` ends the call (the caller reports it).
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

RETRYABLE_STATUS = frozenset({408, 409, 429, 529})


def retryable(status: int | None) -> bool:
    """``None`` stands for a timeout or a connection error."""
    return status is None or status in RETRYABLE_STATUS or status >= 500


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(float(parsed.timestamp()) - (time.time() if now is None else now), 0.0)


def requeue_delay(failures: int, backoff: float, cap: float) -> float:
    """Seconds judge work waits after ``failures`` calls in a row failed for want of a judge
    (``failures`` >= 1): ``backoff`` doubling each time, capped at ``cap``, with "full
    jitter" over its upper half so that waiting work does not come back all at once."""
    base = min(backoff * 2.0 ** (failures - 1), cap)
    return float(base * random.uniform(0.5, 1.0))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: float = 1.0
    max_backoff: float = 30.0
    max_retry_after: float = 120.0
    jitter: float = 0.25  # +- fraction of the computed backoff

    def delay(
        self, attempt: int, status: int | None, headers: Mapping[str, str] | None = None
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (0-based), or None: give up."""
        if attempt >= self.max_retries or not retryable(status):
            return None
        asked = retry_after(headers or {})
        if asked is not None:
            return asked if asked <= self.max_retry_after else None
        base = min(self.backoff * 2.0**attempt, self.max_backoff)
        return float(base * (1 + random.uniform(-self.jitter, self.jitter)))
