"""The passes at close: what only makes sense once a session's items are all in.

Each pass is a pure function of what intake gathered (``Gathered``) and what the passes
before it made: it returns new lists and leaves its arguments, and the objects in them, as
they were.  A load or turn a pass changes is a copy (``changed``); one it leaves alone is
passed on as it came, so what ``run`` returns may hold intake's own objects, which nobody
changes.
``run`` applies the passes in order.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from operator import attrgetter, itemgetter
from typing import Any

from collector.detect import log_calls, messages, names, skill_shapes, skill_tools
from collector.detect.content import parse_json
from collector.detect.detectors import load_of, read_of
from collector.detect.facts import outcomes as outcome_facts
from collector.detect.gathered import Gathered, Seen
from collector.detect.outcome import text_outcome
from collector.detect.transcript import Injection, MessageCall, MessageResult
from evaluators.evidence import (
    Catalog,
    ContentCapture,
    LoadStatus,
    SkillLoad,
    ToolCall,
    Turn,
    fold_skill_name,
)

NO_ID = "#"  # starts the key of a history call recorded without an id
_MAX_ANCESTORS = 64  # a chain of links this long is cut (a cycle, or a very deep trace)
_ACTIVATIONS = ("skill_tool", "log_event")  # loads that activate a skill: a tool call, a logged activation
_NAME_NOT_RECORDED = "the skill's name was not recorded"


@dataclass(frozen=True, slots=True)
class Closed:
    """What the passes made of a session's evidence."""

    tool_calls: list[ToolCall]
    skill_loads: list[SkillLoad]
    turns: list[Turn]
    content_capture: ContentCapture


def run(gathered: Gathered) -> Closed:
    """Every pass, in order; a pass with nothing of its own to read (no log records, no
    history calls, ...) is left out, as it would return what it was given."""
    g = gathered
    calls, loads = merge_split_calls(g.tool_calls, g.skill_loads)  # new lists: the passes' own
    if g.log_calls:
        calls, loads = complete_from_log_calls(calls, loads, g.log_calls, g.links, checks=False)
    # What a permission check names (a skill, a path, a command) is what the call asked for,
    # not content the harness recorded: the session's content capture is read before.
    capture = content_capture(calls, g.content_seen, bool(g.turns))
    if g.log_calls:
        calls, loads = complete_from_log_calls(calls, loads, g.log_calls, g.links, checks=True)
    loads = loads_by_shape(calls, loads, g.catalog, g.known_skills)
    if g.log_results or g.activated or g.unnamed_activations:
        loads = settle_from_records(loads, g.log_results, g.activated, g.unnamed_activations)
    if g.active_skills:
        loads = name_from_requests(loads, g.active_skills)
    if g.injected:
        loads = attach_injections(loads, g.injected)
    if g.message_calls:
        loads = add_message_calls(calls, loads, g.message_calls, g.message_results, g.catalog, g.known_skills)
    loads = keep_names(loads, g.catalog)
    turns = sorted(g.turns, key=_STARTED)
    if len(turns) > 1:
        turns = merge_restated_turns(turns, g.answers)
    if g.answers:
        turns = answer_turns(turns, g.answers)
    calls.sort(key=_STARTED)
    loads.sort(key=_AT)
    return Closed(calls, loads, turns, capture)


_STARTED = attrgetter("start_unix_nano")  # of a turn, of a tool call
_AT = attrgetter("time_unix_nano")  # of a load
_END = itemgetter(0)  # of an answer: (end time, raw answer)


# Every field of a load and of a turn, in their constructors' order (``changed``, ``answer_turns``).
_LOAD_FIELDS = attrgetter(*(f.name for f in fields(SkillLoad)))
_TURN_FIELDS = attrgetter(*(f.name for f in fields(Turn)))


def changed(load: SkillLoad, **changes: Any) -> SkillLoad:
    """A copy of ``load`` with ``changes`` (``dataclasses.replace``, without its per-call
    field walk: every closed session copies its loads)."""
    copy = SkillLoad(*_LOAD_FIELDS(load))
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


def _own(loads: list[SkillLoad]) -> list[SkillLoad]:
    """Copies a pass may change without changing what it was given."""
    return [changed(load) for load in loads]


# -- tool calls ------------------------------------------------------------------------


def merge_split_calls(
    calls: list[ToolCall], loads: list[SkillLoad]
) -> tuple[list[ToolCall], list[SkillLoad]]:
    """One call that two tool spans recorded (a harness's own span beside its framework's:
    the same call id and tool, at most one of them with arguments or result) is one call:
    each part taken from the span that has it, detected once.  Two spans that both hold
    content stay two calls (the same call re-sent as new spans)."""
    first: dict[tuple[str, str], int] = {}
    merged: list[ToolCall] = []
    split: set[tuple[str, str]] = set()  # (trace id, span id) of the spans merged
    for call in calls:
        at = first.get((call.call_id, call.name)) if call.call_id else None
        if at is not None and has_content(merged[at]) and has_content(call):
            at = None  # two full records (a call re-sent as new spans): two calls, as sent
        if at is None:
            if call.call_id:
                first[(call.call_id, call.name)] = len(merged)
            merged.append(call)
            continue
        split |= {(merged[at].trace_id, merged[at].span_id), (call.trace_id, call.span_id)}
        merged[at] = _combined(merged[at], call)
    if not split:
        return list(calls), list(loads)
    kept = [load for load in loads if (load.trace_id, load.span_id) not in split]
    for call in merged:
        load = load_of(call) if (call.trace_id, call.span_id) in split else None
        if load is not None:
            kept.append(load)
    return merged, kept


def complete_from_log_calls(
    calls: list[ToolCall],
    loads: list[SkillLoad],
    logged_calls: list[log_calls.LoggedCall],
    links: dict[bytes, bytes],
    checks: bool,
) -> tuple[list[ToolCall], list[SkillLoad]]:
    """Tool calls as log records complete them: a tool span's missing arguments and error,
    or a call that never ran as a span.  A call the harness logged as succeeded with no
    recorded result is loaded, as a logged tool result settles one.  ``checks``: the logged
    permission checks, else the other logged calls."""
    calls, loads = list(calls), list(loads)
    logged = [entry for entry in logged_calls if entry.inside == checks]
    if not logged:
        return calls, loads

    def ancestors(span_id: str) -> list[str]:
        return _ancestors(links, span_id)

    for index, done in log_calls.completions(calls, logged, ancestors):
        if index is not None:
            old = calls[index]
            calls[index] = done.call
            loads = [
                load for load in loads if not (load.span_id == old.span_id and load.trace_id == old.trace_id)
            ]
        else:
            calls.append(done.call)
        load = load_of(done.call)
        if load is not None:
            if load.status == "unresolved" and done.succeeded:
                load.status = "loaded"  # a new load, this pass's own
            loads.append(load)
    return calls, loads


def _ancestors(links: dict[bytes, bytes], span_id: str) -> list[str]:
    """The span ``span_id`` (hex) and its ancestors up through spans that record nothing but
    their parent (``links``), nearest first; the first one that records something (or is
    not known) ends the list."""
    chain = [span_id]
    at = bytes.fromhex(span_id)
    while at in links and len(chain) < _MAX_ANCESTORS:
        at = links[at]
        if not at:
            break
        chain.append(at.hex())
    return chain


def content_capture(calls: list[ToolCall], content_seen: bool, has_turns: bool) -> ContentCapture:
    """Whether the session's tool calls came with their content: "present" when any call's
    arguments or result are known (from its span, or the log record that reported it)."""
    if calls:
        return "present" if any(has_content(c) for c in calls) else "missing"
    # No tool ran.  With no prompt content either, silence proves nothing.
    return "no_tools" if content_seen or has_turns else "missing"


def loads_by_shape(
    calls: list[ToolCall], loads: list[SkillLoad], catalog: Catalog, known: Mapping[str, str]
) -> list[SkillLoad]:
    """Calls no detector claimed, read again once the session's catalog and the registry
    (``known``) are known: a tool whose arguments name one of their skills
    (``skill_shapes.detect_named``)."""
    if not calls or not (catalog.skills or known):
        return list(loads)
    claimed = {(load.trace_id, load.span_id) for load in loads}
    found = list(loads)
    for call in calls:
        if (call.trace_id, call.span_id) not in claimed:
            load = skill_shapes.detect_named(call, catalog, known)
            if load is not None:
                found.append(load)
    return found


# -- records that settle loads ---------------------------------------------------------


def settle_from_records(
    loads: list[SkillLoad],
    log_results: dict[str, tuple[bool, Seen]],
    activated: dict[str, tuple[str, Seen, bool]],
    unnamed: list[tuple[Seen, bool]],
) -> list[SkillLoad]:
    """A tool span with no recorded result, settled by what else the harness recorded: a
    logged tool result, or the skill's activation (a log record, a span event)."""
    loads = [
        _settled(load, log_results, activated) if load.status == "unresolved" else load for load in loads
    ]
    # An activation recorded with no tool span at all (traces not exported, or sampled out,
    # or a skill the user invoked); one without a name, where no skill call of its trace
    # stands for it.
    called = {load.trace_id for load in loads if load.signal == "skill_tool"}
    spanned = {load.key for load in loads}
    activations = [("", seen, ok) for seen, ok in unnamed if seen.trace_id not in called]
    activations += [(skill, seen, ok) for key, (skill, seen, ok) in activated.items() if key not in spanned]
    for skill, seen, ok in activations:
        loads.append(
            SkillLoad(
                skill=skill,
                status="loaded" if ok else "failed",
                signal="log_event",
                span_id=seen.span_id,
                trace_id=seen.trace_id,
                time_unix_nano=seen.time_unix_nano,
            )
        )
    return loads


def _settled(
    load: SkillLoad, log_results: dict[str, tuple[bool, Seen]], activated: dict[str, tuple[str, Seen, bool]]
) -> SkillLoad:
    """An unresolved load as a logged tool result, else its skill's activation, settles it."""
    logged = log_results.get(load.tool_call_id or "")
    if logged is not None:
        return changed(load, status="loaded" if logged[0] else "failed")
    activation = activated.get(load.key)
    if activation is not None:
        return changed(load, status="loaded" if activation[2] else "failed")
    return load


def name_from_requests(loads: list[SkillLoad], active_skills: list[tuple[int, str, str]]) -> list[SkillLoad]:
    """A skill activation (a tool call, or a logged one) that recorded no name takes the one
    the next model request of its trace ran under (``log_facts.LOG_ACTIVE_SKILL``)."""
    if not active_skills:
        return list(loads)
    loads = list(loads)
    requests = sorted(active_skills)
    for i, load in enumerate(loads):
        if load.skill or load.signal not in _ACTIVATIONS or load.status == "failed":
            continue
        after = next(
            (skill for at, trace, skill in requests if trace == load.trace_id and at >= load.time_unix_nano),
            None,
        )
        if after is not None:
            loads[i] = changed(load, skill=after)
    return loads


def attach_injections(loads: list[SkillLoad], injected: dict[str, tuple[Injection, Seen]]) -> list[SkillLoad]:
    """An injected body that follows a skill's activation (a skill tool call, or one the
    harness logged, as for a skill the user invoked) is that load's body; any other is a
    load of its own (signal ``injected``), unless it repeats a load's body."""
    loads = list(loads)
    for key, (injection, seen) in injected.items():
        after_call = [
            i
            for i, load in enumerate(loads)
            if load.key == key and load.signal in _ACTIVATIONS and load.status in ("loaded", "unresolved")
        ]
        if injection.follows_tool and after_call:
            for i in after_call:
                loads[i] = changed(loads[i], status="loaded", body=loads[i].body or injection.body or None)
            continue
        if injection.body and any(
            load.key == key and load.body and injection.body in load.body for load in loads
        ):
            continue  # a load's own result, seen again in a later request's history
        loads.append(
            SkillLoad(
                skill=injection.skill,
                status="loaded",
                signal="injected",
                span_id=seen.span_id,
                trace_id=seen.trace_id,
                time_unix_nano=seen.time_unix_nano,
                body=injection.body or None,
                path=injection.path,
            )
        )
    return loads


def keep_names(loads: list[SkillLoad], catalog: Catalog) -> list[SkillLoad]:
    """A value that is no skill name is not reported as one (``names.plausible``, the
    catalog's names allowed whatever their case), and loads nothing.  A load whose name was
    not recorded (a harness told not to record arguments) loaded some skill, which one
    unknown: unresolved, never loaded."""
    kept = list(loads)
    for i, load in enumerate(kept):
        if load.skill and not names.plausible(load.skill, catalog.skills):
            kept[i] = changed(
                load,
                message=load.message or f"not a skill name: {load.skill[:200]!r}",
                skill="",
                status="failed" if load.status == "loaded" else load.status,
            )
        elif not load.skill and load.status == "loaded":
            kept[i] = changed(load, status="unresolved", message=load.message or _NAME_NOT_RECORDED)
    return kept


# -- calls only a history shows --------------------------------------------------------


def add_message_calls(
    calls: list[ToolCall],
    loads: list[SkillLoad],
    message_calls: dict[str, tuple[MessageCall, Seen]],
    message_results: dict[str, MessageResult],
    catalog: Catalog | None = None,
    known: Mapping[str, str] | None = None,
) -> list[SkillLoad]:
    """Calls seen only in histories: skill calls the harness never ran as tools (denied,
    invalid), by the table or by their shape (``skill_shapes``, with the session's
    ``catalog`` and the registry's ``known`` names), and reads whose span was not exported.
    A call a span recorded too is the span's: by call id, or by skill when the history has
    no ids."""
    if not message_calls:
        return list(loads)
    loads = _own(loads)
    span_call_ids = {c.call_id for c in calls if c.call_id}
    span_skills = {load.key for load in loads if load.signal == "skill_tool"}
    span_loads: dict[str, SkillLoad] = {}
    for load in loads:
        if load.signal == "skill_tool":
            span_loads.setdefault(load.key, load)
    span_reads = {(load.signal, load.key): load for load in loads}
    by_call_id = {load.tool_call_id: load for load in loads if load.tool_call_id}
    for call_id, (call, seen) in message_calls.items():
        key = skill_tools.argument_key(call.name)
        on_span = call_id in span_call_ids
        if key is None:
            if on_span and not _may_settle(by_call_id.get(call_id)):
                continue  # the span's own load: nothing a history shows would change it
            read = _history_read(call_id, call, seen, message_results)
            if read is None:
                shaped = (
                    None
                    if on_span
                    else _history_skill_call(call_id, call, seen, message_results, catalog, known)
                )
                if shaped is not None and (shaped.key not in span_skills or not shaped.skill):
                    span_skills.add(shaped.key)
                    loads.append(shaped)
                elif shaped is not None and shaped.key in span_loads:
                    _settle(span_loads[shaped.key], shaped)
                continue
            # The span or log record of the same call (by id, else by what it read).
            same = by_call_id.get(call_id) if on_span else span_reads.get((read.signal, read.key))
            if same is None and not on_span:
                span_reads[(read.signal, read.key)] = read
                loads.append(read)
            elif same is not None and same.status == "unresolved" and read.status != "unresolved":
                # The span kept no outcome; the history shows what the read returned.
                same.status, same.message, same.body, same.body_cut = (
                    read.status,
                    read.message,
                    read.body,
                    read.body_cut,
                )
            elif same is not None and read.status == same.status == "loaded" and read.body and not same.body:
                same.body = read.body  # the span kept no result; the history shows what it returned
            continue
        if on_span:
            continue
        skill = names.decoded(skill_tools.skill_argument(call.arguments, key))
        result = message_results.get(call_id)
        status, message, body = _history_outcome(result, skill)
        if fold_skill_name(skill) in span_skills and skill:
            # A tool span recorded it; this harness just puts no call id on spans.
            same = span_loads.get(fold_skill_name(skill))
            if same is not None:
                _settle(same, changed(same, status=status, message=message, body=body))
            continue
        span_skills.add(fold_skill_name(skill))
        loads.append(
            SkillLoad(
                skill=skill,
                status=status,
                signal="chat_message",
                span_id=seen.span_id,
                trace_id=seen.trace_id,
                time_unix_nano=seen.time_unix_nano,
                body=body,
                message=message,
                tool_call_id=None if call_id.startswith(NO_ID) else call_id,
            )
        )
    return loads


def _may_settle(span_load: SkillLoad | None) -> bool:
    """Whether a history's read of the same call could still settle ``span_load``: it kept
    no outcome, or it loaded and kept no body."""
    return span_load is not None and (
        span_load.status == "unresolved" or (span_load.status == "loaded" and not span_load.body)
    )


def _history_outcome(result: MessageResult | None, skill: str) -> tuple[LoadStatus, str | None, str | None]:
    """A skill tool call's outcome as its result in a history shows it: (status, message, body)."""
    if result is None:
        return "unresolved", None, None
    status, message = text_outcome(result.text, _parsed(result), result.is_error)
    if status == "loaded" and outcome_facts.DENIALS.search(result.text):
        return "denied", result.text[:500], None
    return status, message, skill_tools.body_of(result.text, skill) if status == "loaded" else None


def _settle(span_load: SkillLoad, history_load: SkillLoad) -> None:
    """A tool span's load that kept no outcome (its result redacted or not recorded) takes
    the outcome the history shows for the same call."""
    if span_load.status == "unresolved" and history_load.status != "unresolved":
        span_load.status, span_load.message, span_load.body, span_load.body_cut = (
            history_load.status,
            history_load.message,
            history_load.body,
            history_load.body_cut,
        )


def _history_read(
    call_id: str, call: MessageCall, seen: Seen, results: dict[str, MessageResult]
) -> SkillLoad | None:
    """A SKILL.md read that only a history shows, read as its tool span would be."""
    result = results.get(call_id)
    if result is None:
        return None  # no outcome: nothing to tell a read from a write
    return read_of(_as_span(call_id, call, seen, result))


def _history_skill_call(
    call_id: str,
    call: MessageCall,
    seen: Seen,
    results: dict[str, MessageResult],
    catalog: Catalog | None,
    known: Mapping[str, str] | None,
) -> SkillLoad | None:
    """A skill tool call no row names that only a history shows, told by its shape."""
    result = results.get(call_id)
    if result is None:
        return None
    as_span = _as_span(call_id, call, seen, result)
    load = skill_shapes.detect(as_span)
    if load is None and catalog is not None:
        load = skill_shapes.detect_named(as_span, catalog, known or {})
    return changed(load, signal="chat_message") if load is not None else None


def _as_span(call_id: str, call: MessageCall, seen: Seen, result: MessageResult) -> ToolCall:
    """A history's call and its result, as its tool span would record them."""
    arguments = call.arguments if isinstance(call.arguments, str) else json_text(call.arguments)
    return ToolCall(
        name=call.name,
        span_id=seen.span_id,
        trace_id=seen.trace_id,
        start_unix_nano=seen.time_unix_nano,
        call_id=None if call_id.startswith(NO_ID) else call_id,
        arguments=arguments,
        result=result.text
        if result.value is None or isinstance(result.value, str)
        else json_text(result.value),
        error=result.text or "the tool reported an error" if result.is_error else None,
    )


# -- turns -----------------------------------------------------------------------------


def merge_restated_turns(turns: list[Turn], answers: list[tuple[int, str]]) -> list[Turn]:
    """A request that holds the one kept before it, in the same trace, with no answer in
    between, restates it (a framework handing a task down its layers, each span recording
    the request anew): one turn, the first."""
    kept: list[Turn] = []
    for turn in turns:
        last = kept[-1] if kept else None
        if (
            last is not None
            and turn.trace_id == last.trace_id
            and last.user_message in turn.user_message
            and not any(last.start_unix_nano <= end < turn.start_unix_nano for end, _ in answers)
        ):
            continue
        kept.append(turn)
    return kept


def answer_turns(turns: list[Turn], answers: list[tuple[int, str]]) -> list[Turn]:
    """Each turn with its answer: the latest recorded answer before the next turn began (of
    answers that end together, the one that arrived last)."""
    if not answers:
        return list(turns)
    ordered = sorted(answers, key=_END)
    ends = [end for end, _ in ordered]
    answered: list[Turn] = []
    for i, turn in enumerate(turns):
        start = bisect_left(ends, turn.start_unix_nano)
        stop = bisect_left(ends, turns[i + 1].start_unix_nano) if i + 1 < len(turns) else len(ends)
        response = turn.response
        for _, raw in reversed(ordered[start:stop]):
            text = messages.answer_text(raw)
            if text:
                response = text
                break
        if response is not turn.response:
            turn = Turn(*_TURN_FIELDS(turn))
            turn.response = response
        answered.append(turn)
    return answered


# -- helpers ---------------------------------------------------------------------------


def has_content(call: ToolCall) -> bool:
    return call.arguments is not None or call.result is not None


def _combined(one: ToolCall, other: ToolCall) -> ToolCall:
    """Two spans' records of one call as one: the span with content first, the other filling
    in what it lacks; an error either recorded stands."""
    if not has_content(one):
        one, other = other, one
    return replace(
        one,
        arguments=one.arguments if one.arguments is not None else other.arguments,
        result=one.result if one.result is not None else other.result,
        error=one.error or other.error,
        skill_attribute=one.skill_attribute or other.skill_attribute,
        skill_resolved=one.skill_resolved or other.skill_resolved,
        succeeded=one.succeeded or other.succeeded,
        end_unix_nano=one.end_unix_nano or other.end_unix_nano,
    )


def json_text(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, default=str)``, by one encoder made once (``dumps``
    with options makes an encoder a call)."""
    return _JSON_TEXT.encode(value)


_JSON_TEXT = json.JSONEncoder(ensure_ascii=False, default=str)


def _parsed(result: MessageResult) -> object:
    value = result.value
    return value if isinstance(value, (dict, list)) else parse_json(value) if isinstance(value, str) else None
