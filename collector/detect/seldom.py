"""The evidence few sessions gather, kept apart from ``SessionEvidence`` and made on first need.

Most sessions record no log record that reports a tool call or a skill activation, no
expected skill, no skill body injected into a turn, no request read from a harness's own
input keys, no bare span and no unreadable item (on the benchmark's traffic each of these is
filled in fewer than one session in ten).  A session holds a ``Seldom`` only once one of
them is added (``SessionEvidence``), so a session that gathers none costs none of these
containers, nor the garbage collector's visits to them.

``NOTHING`` stands for a session that gathered none: it is read, never written.
"""

from __future__ import annotations

from typing import TypeVar

from collector.detect.expectations import Expected
from collector.detect.gathered import Seen
from collector.detect.log_calls import LoggedCall
from collector.detect.transcript import Injection
from evaluators.evidence import Turn, UnreadableItem

MAX_UNREADABLE_NAMED = 20  # unreadable items named per session (all are counted)

K = TypeVar("K")
V = TypeVar("V")


class Seldom:
    """One session's evidence of the kinds few sessions gather; ``SessionEvidence`` adds to it."""

    __slots__ = (
        "activated",
        "active_skills",
        "expected",
        "injected",
        "input_turns",
        "links",
        "log_calls",
        "log_results",
        "unnamed_activations",
        "unreadable",
        "unreadable_count",
    )

    def __init__(self) -> None:
        self.expected: dict[str, Expected] = {}  # folded name -> the skill as written, and why
        self.injected: dict[str, tuple[Injection, Seen]] = {}  # folded skill -> its body, first seen
        self.input_turns: list[Turn] = []  # requests in ``messages.input_texts``, if no other
        # Span id -> parent span id of spans that record nothing but their place in the trace
        # (no attributes): how a log record logged deep under a tool call reaches its span.
        self.links: dict[bytes, bytes] = {}
        self.log_calls: list[LoggedCall] = []  # tool calls that log records report
        self.log_results: dict[str, tuple[bool, Seen]] = {}  # tool call id -> success
        self.activated: dict[str, tuple[str, Seen, bool]] = {}  # folded skill -> first activation, ok
        self.active_skills: list[tuple[int, str, str]] = []  # (time, trace id, skill) of requests
        self.unnamed_activations: list[tuple[Seen, bool]] = []  # activations logged without a name
        self.unreadable: list[UnreadableItem] = []  # the first ``MAX_UNREADABLE_NAMED``
        self.unreadable_count = 0

    def note_unreadable(self, item: UnreadableItem) -> None:
        """An item that could not be read: counted, the first few named."""
        self.unreadable_count += 1
        if len(self.unreadable) < MAX_UNREADABLE_NAMED:
            self.unreadable.append(item)

    def absorb(self, other: Seldom) -> None:
        """Take in what ``other`` (a provisional session's) gathered: what each holds first stays."""
        for key, skill in other.expected.items():
            self.expected.setdefault(key, skill)
        keep_first(self.injected, other.injected)
        self.input_turns += other.input_turns
        self.links.update(other.links)
        self.log_calls += other.log_calls
        keep_first(self.log_results, other.log_results)
        keep_first(self.activated, other.activated)
        self.active_skills += other.active_skills
        self.unnamed_activations += other.unnamed_activations
        self.unreadable_count += other.unreadable_count
        self.unreadable += other.unreadable[: max(0, MAX_UNREADABLE_NAMED - len(self.unreadable))]


def keep_first(mine: dict[K, V], theirs: dict[K, V]) -> None:
    """Add ``theirs``' entries whose keys ``mine`` lacks."""
    for key, value in theirs.items():
        mine.setdefault(key, value)


NOTHING = Seldom()  # a session that gathered none of these (read only)

__all__ = ["MAX_UNREADABLE_NAMED", "NOTHING", "Seldom", "keep_first"]
