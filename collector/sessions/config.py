"""The sessions' config section: keys, close rules, limits."""

from __future__ import annotations

import re

from pydantic import (
    Field,
    field_validator,
)

from collector.configtypes import Bytes, NonNegativeSeconds, Seconds, Strict
from collector.detect.facts import sessions as session_facts

_KEY = re.compile(r"^(span|resource):\S+$")


class Sessions(Strict):
    keys: tuple[str, ...] = session_facts.SESSION_KEYS
    # When no configured key is present: an attribute whose name ends in conversation_id,
    # session_id, session.id or thread_id (any namespace) names the session.
    keys_by_shape: bool = True
    idle_timeout: Seconds = 300.0
    max_duration: Seconds = 6 * 3600.0
    max_spans: int = Field(20_000, gt=0)
    max_bytes: Bytes = 200 * 1000**2
    max_open: int = Field(100_000, gt=0)
    # Per session: catalog entries kept (more are counted, and the coverage line says
    # catalog.truncated) and characters of each loaded SKILL.md body kept.
    max_catalog_entries: int = Field(500, gt=0)
    max_skill_body_chars: int = Field(256 * 1024, ge=1024)
    # Acknowledged (spooled) trace requests waiting for the assembler; beyond this, backpressure.
    max_pending_requests: int = Field(64, gt=0)
    # How long a request arriving at a full queue waits for room before it is refused (0: refused
    # at once); at most max_pending_requests requests wait so.
    pending_wait: NonNegativeSeconds = 2.0
    end_attribute: str = "skillgauge.session.end"
    # Closed sessions kept so late spans reopen them whole (a new revision): with a durable
    # spool as their request ids (a late span rebuilds one from its requests), in memory with
    # their evidence.
    reopen_cache: int = Field(2_000, ge=0)
    # ... and at most this many bytes of evidence held (their items' bytes as received), the
    # oldest out first.
    reopen_cache_bytes: Bytes = 64 * 1024**2
    check_interval: Seconds = 1.0

    @field_validator("keys")
    @classmethod
    def _keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            if not _KEY.match(key):
                raise ValueError(
                    f"{key!r} must be 'span:<attribute>' or 'resource:<attribute>', e.g. span:session.id"
                )
        if not keys:
            raise ValueError("list at least one key, e.g. [span:session.id]")
        return keys
