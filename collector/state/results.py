"""The latest results of recently closed sessions, for the status API.

Bounded: the oldest sessions are forgotten first, and a lookup for a forgotten or unknown
session says so instead of pretending it had no results.  Each revision is kept as its
encoded JSON records (bytes, which the garbage collector never scans), not as the object
graph it was built from.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from evaluators.result import Coverage


class ResultStore:
    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, list[bytes]] = OrderedDict()
        self.forgotten = 0

    def add(self, session_id: str, results: list[str], coverage: str) -> None:
        """Keep a revision as the latest of its session: its results and coverage line, each
        as JSON text (what the spool stores), in the shape of ``replay_records``."""
        revisions = self._sessions.pop(session_id, [])
        revisions.append(f'[{"".join(f"{r}," for r in results)}{{"coverage":{coverage}}}]'.encode())
        self._sessions[session_id] = revisions
        while len(self._sessions) > self.capacity:
            self._sessions.popitem(last=False)
            self.forgotten += 1

    def get(self, session_id: str) -> list[list[dict[str, Any]]] | None:
        """Each revision's records (as ``replay_records`` made them), oldest first."""
        revisions = self._sessions.get(session_id)
        return None if revisions is None else [json.loads(encoded) for encoded in revisions]

    def __len__(self) -> int:
        return len(self._sessions)


def replay_records(coverage: Coverage) -> list[dict[str, Any]]:
    """The records ``skillgauge replay --format json`` prints for one session revision."""
    return [r.to_dict() for r in coverage.results] + [{"coverage": coverage.to_dict()}]
