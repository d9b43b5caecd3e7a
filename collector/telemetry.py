"""What every component's metrics share: bounded skill labels and a cache of labelled series.

Labels never carry a session id, a score or free text.  Skill names are capped to the
skills seen in catalogs (and the operator's registry); anything else is ``other``, and
the cap itself is bounded, so a misbehaving agent cannot explode the series count.
"""

from __future__ import annotations

from typing import Any

from evaluators.evidence import fold_skill_name

MAX_SKILL_LABELS = 200
OTHER = "other"


class SkillLabels:
    """Maps a skill name to a bounded label value."""

    def __init__(self, limit: int = MAX_SKILL_LABELS) -> None:
        self._known: set[str] = set()
        self._limit = limit

    def learn(self, names: list[str]) -> None:
        for name in names:
            if len(self._known) >= self._limit:
                return
            self._known.add(fold_skill_name(name))

    def __call__(self, name: str | None) -> str:
        folded = fold_skill_name(name or "")
        return folded if folded in self._known else OTHER


class Series:
    """``metric.labels(*labels)``, remembered: every closed session counts a dozen series,
    and ``labels`` validates and locks on each call.  Label values are bounded by design."""

    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def __call__(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child
