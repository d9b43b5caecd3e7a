"""Judge cost from billed tokens and per-model prices (US dollars per million tokens)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prices:
    input: float
    output: float
    cache_read: float
    cache_write: float

    @classmethod
    def of(
        cls, input: float, output: float, cache_read: float | None = None, cache_write: float | None = None
    ) -> Prices:
        return cls(
            input,
            output,
            input * 0.1 if cache_read is None else cache_read,
            input * 1.25 if cache_write is None else cache_write,
        )

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_read * self.cache_read
            + cache_write * self.cache_write
        ) / 1_000_000
