"""The records of one evaluated session revision, as ``skillgauge replay`` prints them and
the status API serves them (read back from the store: ``collector.status.listing``)."""

from __future__ import annotations

from typing import Any

from evaluators.result import Coverage


def replay_records(coverage: Coverage) -> list[dict[str, Any]]:
    """The records ``skillgauge replay --format json`` prints for one session revision."""
    return [r.to_dict() for r in coverage.results] + [{"coverage": coverage.to_dict()}]
