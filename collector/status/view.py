"""What the status extension reads of the running chain: a small view, not its insides."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from prometheus_client import CollectorRegistry

# storage_unavailable: writes to the spool fail (a full disk); requests are refused as
# retryable until one succeeds again.
State = Literal["starting", "ready", "draining", "storage_unavailable"]


class StatusView(Protocol):
    @property
    def registry(self) -> CollectorRegistry:
        """Every component's metrics."""
        ...

    @property
    def results_capacity(self) -> int:
        """How many sessions' results are kept for lookups."""
        ...

    def state(self) -> State: ...

    def open_count(self) -> int: ...

    def refresh(self) -> None:
        """Bring gauges up to date before a scrape."""

    async def session(self, session_id: str, tenant: str = "") -> tuple[dict[str, Any] | None, list[Any]]:
        """(the open session's summary or None, its evaluated revisions' records) of the
        session ``session_id`` of ``tenant``, once every acknowledged request has been
        assembled."""
        ...

    def count_refusal(self, endpoint: str) -> None:
        """A request to ``endpoint`` (metrics | sessions) refused for want of credentials."""
