"""Hard ceilings on judge spend: tokens and US dollars per calendar hour and day (UTC).

A call is admitted only if its *estimate* fits under every ceiling on top of what was
spent and what calls in flight have reserved; when it completes, the reservation is
replaced by what it really cost.  So concurrent calls cannot overshoot together, and a
refused call becomes ``skipped / budget_exhausted`` instead of a silent over-spend.
The clock is passed in; nothing here sleeps or reads the time itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

HOUR, DAY = 3600, 86400


@dataclass(frozen=True, slots=True)
class Limits:
    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None
    usd_per_hour: float | None = None
    usd_per_day: float | None = None


@dataclass(slots=True)
class _Window:
    seconds: int
    key: int = -1
    tokens: float = 0
    usd: float = 0.0

    def roll(self, now: float) -> None:
        key = int(now // self.seconds)
        if key != self.key:
            self.key, self.tokens, self.usd = key, 0, 0.0


@dataclass(slots=True)
class Reservation:
    tokens: int
    usd: float
    keys: tuple[int, int]  # (hour, day) window keys when reserved


@dataclass
class Budget:
    name: str
    limits: Limits
    clock: Callable[[], float]
    _hour: _Window = field(default_factory=lambda: _Window(HOUR))
    _day: _Window = field(default_factory=lambda: _Window(DAY))
    refused: int = 0  # calls refused, since the start

    def _roll(self) -> None:
        now = self.clock()
        self._hour.roll(now)
        self._day.roll(now)

    def refusal(self, tokens: int, usd: float) -> str | None:
        """Why a call of this estimate may not start now, or None if it fits."""
        self._roll()
        checks = (
            ("tokens_per_hour", self.limits.tokens_per_hour, self._hour.tokens, tokens),
            ("tokens_per_day", self.limits.tokens_per_day, self._day.tokens, tokens),
            ("usd_per_hour", self.limits.usd_per_hour, self._hour.usd, usd),
            ("usd_per_day", self.limits.usd_per_day, self._day.usd, usd),
        )
        for what, limit, used, more in checks:
            if limit is not None and used + more > limit:
                self.refused += 1
                return f"{self.name} {what} budget {limit:g} reached ({used:g} used or reserved, this call needs up to {more:g})"
        return None

    def reserve(self, tokens: int, usd: float) -> Reservation:
        self._roll()
        for window in (self._hour, self._day):
            window.tokens += tokens
            window.usd += usd
        return Reservation(tokens, usd, (self._hour.key, self._day.key))

    def settle(self, reservation: Reservation, tokens: int, usd: float) -> None:
        """Replace a reservation with the real cost (in the windows it was made in, if current)."""
        self._roll()
        for window, key in ((self._hour, reservation.keys[0]), (self._day, reservation.keys[1])):
            if window.key == key:
                window.tokens += tokens - reservation.tokens
                window.usd += usd - reservation.usd
            else:  # the window rolled over while the call ran: charge the new one
                window.tokens += tokens
                window.usd += usd

    def used(self) -> dict[str, float]:
        self._roll()
        return {
            "tokens_hour": self._hour.tokens,
            "tokens_day": self._day.tokens,
            "usd_hour": self._hour.usd,
            "usd_day": self._day.usd,
        }


@dataclass
class Budgets:
    """Several budgets that must all admit a call (the judge's and the evaluator's)."""

    budgets: list[Budget]

    def try_reserve(self, tokens: int, usd: float) -> tuple[list[Reservation], str | None]:
        for budget in self.budgets:
            why = budget.refusal(tokens, usd)
            if why is not None:
                return [], why
        return [b.reserve(tokens, usd) for b in self.budgets], None

    def settle(self, reservations: list[Reservation], tokens: int, usd: float) -> None:
        for budget, reservation in zip(self.budgets, reservations, strict=True):
            budget.settle(reservation, tokens, usd)


class SessionTokens:
    """A ceiling on the judge input tokens one session revision may use, over all of its
    judge calls.  Remembers the ``capacity`` most recent sessions (far more than can be in
    flight at once, bounded by the judge queue)."""

    def __init__(self, limit: int | None, capacity: int = 4096) -> None:
        self.limit = limit
        self._capacity = capacity
        self._used: dict[tuple[str, int], int] = {}

    def refusal(self, key: tuple[str, int], tokens: int) -> str | None:
        used = self._used.get(key, 0)
        if self.limit is None or used + tokens <= self.limit:
            return None
        return (
            f"judge max_session_input_tokens {self.limit} reached ({used} used or reserved by "
            f"this session, this call needs up to {tokens})"
        )

    def charge(self, key: tuple[str, int], tokens: int) -> None:
        """Add (or, negative, give back) tokens to a session's count."""
        if self.limit is None:
            return
        used = self._used.pop(key, 0) + tokens  # re-insert: the most recent is last
        self._used[key] = max(used, 0)
        while len(self._used) > self._capacity:
            del self._used[next(iter(self._used))]
