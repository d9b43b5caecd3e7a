"""What a judge reads about a session: the request, the context before a call, the trajectory.

Pure functions over ``evidence.Session``.  Text is rendered as plain lines (``User:``,
``Tool call``, ``Agent:``) in time order; it is untrusted and is fenced by the prompt
builder, never here.
"""

from __future__ import annotations

from evaluators.evidence import Session, SkillLoad, ToolCall, Turn

NONE_RECORDED = "(none recorded)"


def load_time(session: Session, load: SkillLoad) -> int:
    """When a load happened: its own timestamp, else its tool call's start, else 'the end'."""
    if load.time_unix_nano:
        return load.time_unix_nano
    for call in session.tool_calls:
        if call.span_id == load.span_id or (load.tool_call_id and call.call_id == load.tool_call_id):
            return call.start_unix_nano
    return 2**63


def triggering_turn(session: Session, at_ns: int) -> Turn | None:
    """The user turn a call at ``at_ns`` belongs to: the last one that started before it."""
    started = [t for t in session.turns if t.start_unix_nano <= at_ns]
    if started:
        return max(started, key=lambda t: t.start_unix_nano)
    return session.turns[0] if session.turns else None


def _call_line(call: ToolCall) -> str:
    outcome = (
        f"error: {call.error}"
        if call.error
        else f"result: {call.result if call.result is not None else '(not recorded)'}"
    )
    return f"Tool call {call.name}({call.arguments or ''}) -> {outcome}"


def trajectory(session: Session, before_ns: int | None = None) -> str:
    """The session as text.  With ``before_ns``: only what happened strictly before it."""
    turns = sorted(session.turns, key=lambda t: t.start_unix_nano)
    calls = sorted(session.tool_calls, key=lambda c: c.start_unix_nano)
    limit = before_ns if before_ns is not None else 2**63 + 1
    lines: list[str] = []
    bounds = [t.start_unix_nano for t in turns] + [2**63 + 1]
    for call in calls:  # calls before the first recorded turn
        if turns and call.start_unix_nano >= bounds[0]:
            break
        if call.start_unix_nano < limit:
            lines.append(_call_line(call))
    for i, turn in enumerate(turns):
        if turn.start_unix_nano >= limit:
            break
        lines.append(f"User: {turn.user_message}")
        in_turn = [c for c in calls if bounds[i] <= c.start_unix_nano < bounds[i + 1]]
        lines += [_call_line(c) for c in in_turn if c.start_unix_nano < limit]
        # A turn's answer comes after its calls: part of the context only if the next turn
        # (or the whole session) is before the limit.
        if turn.response and bounds[i + 1] <= limit:
            lines.append(f"Agent: {turn.response}")
    return "\n".join(lines)


def final_response(session: Session) -> str:
    answered = [t for t in session.turns if t.response]
    return max(answered, key=lambda t: t.start_unix_nano).response or "" if answered else ""


def available_tools(session: Session) -> str:
    names = sorted({c.name for c in session.tool_calls})
    return ", ".join(names) if names else NONE_RECORDED


def has_trajectory(session: Session) -> bool:
    return bool(session.turns or session.tool_calls)


def has_context_before(session: Session, at_ns: int) -> bool:
    """Whether ``trajectory(session, at_ns)`` has a line, without rendering it: a call
    before ``at_ns`` inside a turn implies that turn started before ``at_ns`` too."""
    return any(t.start_unix_nano < at_ns for t in session.turns) or any(
        c.start_unix_nano < at_ns for c in session.tool_calls
    )
