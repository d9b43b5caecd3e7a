"""Which tool calls of a recorded history intake keeps for the passes at close.

A history holds every call the model made, most of which load nothing: kept are the calls
that may (a skill tool, by the table or by a name saying "skill"; arguments naming a
SKILL.md), and the results of the calls kept, each by its call id.  A call without an id
(some providers' parts) is known by its tool, skill and position among such calls in the
history, so the same call read again is kept once; its result is the next result of the
same tool.
"""

from __future__ import annotations

from collector.detect import names, skill_tools
from collector.detect.catalog_shapes import cued
from collector.detect.closing import NO_ID, json_text
from collector.detect.facts import blocks as block_facts
from collector.detect.gathered import Seen
from collector.detect.transcript import MessageCall, MessageResult


def keep(
    found: list[MessageCall | MessageResult],
    seen: Seen,
    calls: dict[str, tuple[MessageCall, Seen]],
    results: dict[str, MessageResult],
    loads: list[bool] | None = None,
) -> None:
    """Add the calls of ``found`` that may load a skill to ``calls`` and every result to
    ``results`` (call id -> the first seen of each).  ``loads``: ``may_load`` of each block,
    when the caller has it (``readings.Contents.loads``)."""
    waiting: dict[str, list[str]] = {}  # tool -> id-less calls without a result yet
    positions: dict[tuple[str, str], int] = {}
    for n, block in enumerate(found):
        if isinstance(block, MessageCall):
            call_id = block.call_id
            if not call_id:
                at = (block.name, _call_skill(block))
                positions[at] = positions.get(at, -1) + 1
                call_id = f"{NO_ID}{at[0]}:{at[1]}:{positions[at]}"
                waiting.setdefault(block.name, []).append(call_id)
                block = MessageCall(call_id, block.name, block.arguments)
            if loads[n] if loads is not None else may_load(block):
                calls.setdefault(call_id, (block, seen))
        else:
            call_id = block.call_id
            if not call_id:
                queue = waiting.get(block.name)
                call_id = queue.pop(0) if queue else ""
            if call_id:
                results.setdefault(call_id, block)


def _call_skill(call: MessageCall) -> str:
    """The skill a history call names, as far as its arguments tell (for keying)."""
    key = skill_tools.argument_key(call.name)
    arguments = call.arguments
    if key is not None:
        return names.decoded(skill_tools.skill_argument(arguments, key))
    return (
        json_text(arguments) if arguments is not None and not isinstance(arguments, str) else arguments or ""
    )


def may_load(call: MessageCall) -> bool:
    """Whether a history call may be a skill load: a skill tool (the table's, or one whose
    name says "skill"), or arguments naming a SKILL.md (read by whatever tool)."""
    if skill_tools.argument_key(call.name) is not None or cued(call.name):
        return True
    arguments = call.arguments
    text = arguments if isinstance(arguments, str) else json_text(arguments) if arguments is not None else ""
    return block_facts.HISTORY_CALL_MARKER in text
