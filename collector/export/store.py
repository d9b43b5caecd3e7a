"""The latest results of recently closed sessions, for the status API.

Bounded: the oldest sessions are forgotten first, and a lookup for a forgotten or unknown
session says so instead of pretending it had no results.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from evaluators.result import Coverage


class ResultStore:
    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, list[Coverage]] = OrderedDict()
        self.forgotten = 0

    def add(self, coverage: Coverage) -> None:
        key = coverage.session.session_id
        revisions = self._sessions.pop(key, [])
        revisions.append(coverage)
        self._sessions[key] = revisions
        while len(self._sessions) > self.capacity:
            self._sessions.popitem(last=False)
            self.forgotten += 1

    def get(self, session_id: str) -> list[Coverage] | None:
        return self._sessions.get(session_id)

    def __len__(self) -> int:
        return len(self._sessions)


def replay_records(coverage: Coverage) -> list[dict[str, Any]]:
    """The records ``skillgauge replay --format json`` prints for one session revision."""
    return [r.to_dict() for r in coverage.results] + [{"coverage": coverage.to_dict()}]
