"""What a session's intake gathered, as the passes at close read it.

``SessionEvidence`` (intake) fills these as items arrive; at close ``closing`` reads them
as they are, and never writes to them or to what they hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from collector.detect.log_calls import LoggedCall
from collector.detect.transcript import Injection, MessageCall, MessageResult
from evaluators.evidence import Catalog, SkillLoad, ToolCall, Turn


@dataclass(slots=True)
class Seen:
    """Where a message-level signal was first seen."""

    trace_id: str
    span_id: str
    time_unix_nano: int


@dataclass(slots=True)
class Gathered:
    """One session's evidence at close: intake's (``SessionEvidence``) own containers, read
    only, for as long as the passes run."""

    tool_calls: list[ToolCall]
    skill_loads: list[SkillLoad]
    turns: list[Turn]
    catalog: Catalog
    answers: list[tuple[int, str]] = field(default_factory=list)  # (end time, raw answer)
    content_seen: bool = False
    log_calls: list[LoggedCall] = field(default_factory=list)
    links: dict[bytes, bytes] = field(default_factory=dict)  # span id -> parent, of bare spans
    log_results: dict[str, tuple[bool, Seen]] = field(default_factory=dict)  # call id -> success
    activated: dict[str, tuple[str, Seen, bool]] = field(default_factory=dict)  # folded -> (skill, seen, ok)
    unnamed_activations: list[tuple[Seen, bool]] = field(default_factory=list)
    active_skills: list[tuple[int, str, str]] = field(default_factory=list)  # (time, trace, skill)
    injected: dict[str, tuple[Injection, Seen]] = field(default_factory=dict)  # folded skill ->
    message_calls: dict[str, tuple[MessageCall, Seen]] = field(default_factory=dict)
    message_results: dict[str, MessageResult] = field(default_factory=dict)
    known_skills: Mapping[str, str] = field(default_factory=dict)  # the registry: folded -> name
