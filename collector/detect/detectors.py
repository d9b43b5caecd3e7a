"""The signal detectors of tool calls, and the one rule that picks among them.

Each detector is gated on what distinguishes its calls (its tool names, a skill attribute, a
returned SKILL.md), and the gates do not overlap: a call is claimed by at most one detector,
whatever the order below (``claims``; a test replays every recording to hold this).
"""

from __future__ import annotations

from collections.abc import Callable

from collector.detect import any_reads, families, file_reads, shell_reads, skill_attributes, skill_tools
from evaluators.evidence import SkillLoad, ToolCall

Detector = Callable[[families.Family], SkillLoad | None]

# Each signal family: a tool call's ``families.Family`` (what the gates share, worked out once a
# call) -> a skill load or None.
DETECTORS: dict[str, Detector] = {
    "skill_tools": skill_tools.detect_family,  # a tool the table names, or one shaped like a skill tool
    "file_reads": file_reads.detect_family,
    "shell_reads": shell_reads.detect_family,
    "skill_attributes": skill_attributes.detect_family,  # a tool no other detector knows, naming its skill
    "any_reads": any_reads.detect_family,  # any other tool that returned a SKILL.md
}


def load_of(call: ToolCall) -> SkillLoad | None:
    """The skill load a tool call records, by the detector that claims it (None: no load)."""
    family = families.Family(call)
    for detect in DETECTORS.values():
        load = detect(family)
        if load is not None:
            return load
    return None


def read_of(call: ToolCall) -> SkillLoad | None:
    """The load of a SKILL.md read (a read tool's or a shell's), or None: what a call only a
    history shows is read for."""
    family = families.Family(call)
    return file_reads.detect_family(family) or shell_reads.detect_family(family)


def claims(call: ToolCall) -> list[str]:
    """Every detector that claims ``call`` (at most one, by the gates' design)."""
    family = families.Family(call)
    return [name for name, detect in DETECTORS.items() if detect(family) is not None]
