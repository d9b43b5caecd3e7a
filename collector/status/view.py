"""What the status extension reads of the running chain: a small view, not its insides.

The query contract (``SessionQuery`` in, ``SessionPage`` out) is what ``GET /v1/sessions``
and the built-in pages share: the filters are parsed once (``collector.status.query``) and
answered from the durable store.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson
from prometheus_client import CollectorRegistry

# storage_unavailable: writes to the spool fail (a full disk); requests are refused as
# retryable until one succeeds again.
State = Literal["starting", "ready", "draining", "storage_unavailable"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """Which evaluated sessions to list: each session once, as its latest revision.

    ``since``/``until``: unix seconds, on the revision's close time (``since`` inclusive,
    ``until`` exclusive).  ``evaluation``, ``status``, ``reason``, ``skill`` and ``passed``
    select sessions with one evaluation row matching all of those given (``status`` may be
    several, joined by commas: a row with any of them).  ``framework`` is
    the coverage line's.  ``tenant``: the sessions of that tenant only (``""`` the default
    tenant's; the status API sets it to the token's own tenant unless the token is an
    operator's).  ``cursor``: ``next_cursor`` of the
    previous page (opaque), newest first."""

    since: float | None = None
    until: float | None = None
    evaluation: str | None = None
    status: str | None = None
    reason: str | None = None
    skill: str | None = None
    framework: str | None = None
    passed: bool | None = None
    tenant: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    # "open": the sessions still open instead (``StatusView.open_sessions``; only ``tenant``
    # and ``limit`` apply).
    state: Literal["closed", "open"] = "closed"


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ``SessionQuery``'s answer.  Each row is a session's latest coverage
    summary: ``session_id``, ``revision``, ``closed_at`` (unix seconds), ``tenant``,
    ``framework``, ``close_reason``, ``spans``, ``catalog`` (``state``, ``skills``: how
    many), ``loads_by_status``, ``expectations`` (``expected``, ``missed``: skill lists),
    ``judge_cost_usd``, ``evaluations`` (each ``evaluation``, ``status``, ``reason``,
    ``skill``, ``passed``) and ``detail`` (the path of ``GET /v1/sessions/{id}``).
    ``next_cursor``: None on the last page."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: str | None = None


class StatusView(Protocol):
    @property
    def registry(self) -> CollectorRegistry:
        """Every component's metrics."""
        ...

    def state(self) -> State: ...

    def open_count(self) -> int: ...

    def refresh(self) -> None:
        """Bring gauges up to date before a scrape."""

    async def session(self, session_id: str, tenant: str = "") -> tuple[dict[str, Any] | None, list[Any]]:
        """(the open session's summary or None, its evaluated revisions' records, oldest
        first) of the session ``session_id`` of ``tenant``, once every acknowledged request
        has been assembled."""
        ...

    def open_sessions(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """The sessions still open, of ``tenant`` (every tenant's with None), soonest to
        close first: ``session_id``, ``tenant``, ``revision``, ``spans``, ``skill_loads`` so
        far, ``idle_seconds``, ``closes_in_seconds``, ``closes_by`` (``idle_timeout`` or
        ``max_duration``: what closes it then unless a span comes first), ``also_closed_by``
        (what else would close it sooner: the end attribute, the span and byte limits) and
        ``replica`` (which holds it: with ``storage.shared`` every live replica's are listed,
        as of its last beat, ``collector.status.cluster``)."""
        ...

    async def sessions(self, query: SessionQuery) -> SessionPage:
        """Evaluated sessions matching ``query``, newest first, from the durable store
        (nothing older than ``storage.retention``)."""
        ...

    async def overview(self, since: float, tenant: str | None = None) -> dict[str, Any]:
        """Totals over sessions closed at or after ``since`` (unix seconds), of ``tenant``'s
        sessions (every tenant's with None): ``sessions``,
        ``loads_by_status``, ``sessions_with_expectations``, ``skipped_skill_rate``
        (sessions that missed an expected skill / sessions with expectations; None without
        any), ``omission_verdicts``, ``omission_rate`` (failed ``skill_omission`` verdicts /
        judged ones; None without any), ``judge_cost_usd`` and ``judge_rows``."""
        ...

    def count_refusal(self, endpoint: str, reason: str = "unauthenticated") -> None:
        """A request to ``endpoint`` (metrics | sessions | ui) refused: ``unauthenticated`` (no
        or a wrong token) or ``not_loopback`` (no auth, not open, a remote client)."""


def encode_cursor(closed_at: float, session: str, revision: int) -> str:
    """The opaque ``next_cursor`` of a page that ends at this row (newest first)."""
    return base64.urlsafe_b64encode(orjson.dumps([closed_at, session, revision])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str, int]:
    """The row a cursor names; ``ValueError`` if it is not one ``encode_cursor`` made."""
    try:
        closed_at, session, revision = orjson.loads(
            base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        )
    except (binascii.Error, orjson.JSONDecodeError, ValueError, TypeError):
        raise ValueError("not a cursor this API returned") from None
    if not (isinstance(closed_at, int | float) and isinstance(session, str) and isinstance(revision, int)):
        raise ValueError("not a cursor this API returned")
    return float(closed_at), session, revision
