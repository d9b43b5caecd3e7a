"""Deterministic sampling: the same session gets the same decision on every replica and revision."""

from __future__ import annotations

import hashlib


def sample_point(session_id: str, evaluation: str) -> float:
    """A value in [0, 100) fixed by (evaluation, session); independent across evaluations."""
    digest = hashlib.sha256(f"{evaluation}\x00{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 100.0


def sampled_in(session_id: str, evaluation: str, percent: float) -> bool:
    return percent >= 100.0 or sample_point(session_id, evaluation) < percent
