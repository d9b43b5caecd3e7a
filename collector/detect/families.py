"""Which family of tools a call belongs to by the table's names: a skill tool, a read tool, a
shell tool, or none the table knows.  Each detector is gated on its family, so that a call
is judged by one detector only (``detectors.claims``).

``Family`` holds what every detector's gate reads of one call (its family, its arguments,
its result's text), worked out once for the call however many detectors look at it."""

from __future__ import annotations

from typing import Any

from collector.detect.content import arguments_of, result_text
from collector.detect.facts import reads as read_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from evaluators.evidence import ToolCall


def skill_argument_key(tool: str) -> str | None:
    """The argument holding the skill's name for a skill tool the table names, else None."""
    key = skill_tool_facts.SKILL_TOOLS.get(tool)
    if key is None:
        for suffix, suffix_key in skill_tool_facts.SKILL_TOOL_SUFFIXES.items():
            if tool.endswith(suffix):
                return suffix_key
    return key


def reads_by_command(arguments: Any) -> bool:
    """An editor tool whose command argument says it reads (``read_facts.READ_COMMANDS``)."""
    return (
        isinstance(arguments, dict)
        and arguments.get(read_facts.READ_COMMAND_ARGUMENT) in read_facts.READ_COMMANDS
    )


class Family:
    """One tool call's family and what its detectors share, each worked out once: the skill
    argument key the table names for the tool (``skill_argument_key``), the call's arguments
    (``arguments_of``), whether it is a read or a shell tool, ``known`` and ``unnamed`` as the
    functions of those names answer, ``writes`` (only for a call ``unnamed``: False for every
    other), and the result's text (``text``, made on first use).  Read only."""

    __slots__ = ("_text", "arguments", "call", "key", "known", "read", "shell", "unnamed", "writes")

    def __init__(self, call: ToolCall) -> None:
        name = call.name
        self.call = call
        self.key = skill_argument_key(name)
        self.arguments = arguments = arguments_of(call)
        self.read = name in read_facts.READ_TOOLS or reads_by_command(arguments)
        self.shell = name in read_facts.SHELL_TOOLS
        self.known = self.key is not None or self.shell or self.read
        self.unnamed = not self.known and not call.skill_attribute
        self.writes = self.unnamed and writes(call)
        self._text: str | None = None

    def text(self) -> str:
        """``result_text`` of the call."""
        if self._text is None:
            self._text = result_text(self.call)
        return self._text


def is_read(call: ToolCall) -> bool:
    return call.name in read_facts.READ_TOOLS or reads_by_command(arguments_of(call))


def is_shell(call: ToolCall) -> bool:
    return call.name in read_facts.SHELL_TOOLS


def known(call: ToolCall) -> bool:
    """Whether the table names the call's tool as a skill, read or shell tool."""
    return skill_argument_key(call.name) is not None or is_shell(call) or is_read(call)


def unnamed(call: ToolCall) -> bool:
    """A call of a tool the table does not know, with no attribute naming its skill: one only
    its shape can tell (``skill_shapes``, ``any_reads``)."""
    return not call.skill_attribute and not known(call)


def writes(call: ToolCall) -> bool:
    """Whether the tool's name says it writes (``read_facts.WRITE_TOOL_WORDS``): what it returns
    echoes what it wrote, and loads nothing."""
    folded = call.name.casefold()
    for word in read_facts.WRITE_TOOL_WORDS:  # noqa: SIM110 - a loop makes no generator per call
        if word in folded:
            return True
    return False
