"""Per-session evidence, built incrementally as each span or log record arrives.

``observe_span`` and ``observe_log`` run once per item on the hot path: they classify it
with cheap attribute checks, hand tool calls to the signal detectors in ``DETECTORS``, and
scan prompt text only when a marker says it may hold something.  ``finish`` reconciles what
only makes sense together (a skill tool span and the log record of its result; a call seen
only in messages; a body injected after a call) and returns the ``Session`` evaluators read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import orjson

from collector.detect import (
    any_reads,
    catalogs,
    facts,
    file_reads,
    log_calls,
    messages,
    names,
    shell_reads,
    skill_attributes,
    skill_tools,
    transcript,
)
from collector.detect.content import first_present, has_marker, parse_json, result_text, tool_call
from collector.detect.expectations import EXPECTED_SKILLS_ATTRIBUTE as _EXPECTED
from collector.detect.expectations import NO_RULES, Rules
from collector.detect.outcome import text_outcome
from collector.detect.transcript import Injection, MessageCall, MessageResult, injections_in
from collector.otlp.views import Encoded, EventView, LogView, SpanView
from evaluators.bytecache import ByteCache, register, text_bytes
from evaluators.evidence import (
    Catalog,
    ContentCapture,
    LoadStatus,
    Session,
    SkillLoad,
    ToolCall,
    Turn,
    UnreadableItem,
    fold_skill_name,
)

# Each signal family: tool call -> a skill load or None.  A call matches at most one: each
# detector is gated on its own tool names (skill tools, read tools, shell tools).
DETECTORS: tuple[Callable[[ToolCall], SkillLoad | None], ...] = (
    skill_tools.detect,
    file_reads.detect,
    shell_reads.detect,
    skill_attributes.detect,  # a tool no other detector knows, naming its skill
    any_reads.detect,  # last: any other tool that returned a SKILL.md
)

_READ_DETECTORS = (file_reads.detect, shell_reads.detect)  # for calls only a history shows

# Substrings without which a piece of prompt text holds nothing for each walk of ``_scan``.
_BLOCK_MARKERS: tuple[str, ...] = facts.BLOCK_MARKERS
_EVENT_ACTIVATIONS = facts.SPAN_EVENT_SKILL_ACTIVATED
_CATALOG_NAMES = facts.CATALOG_NAME_ATTRIBUTES
_LOGGED_MESSAGE_KEYS = (*facts.MESSAGE_BODY_KEYS, facts.LOG_MESSAGE_CALLS_KEY)
_INJECTION_MARKERS: tuple[str, ...] = facts.INJECTION_MARKERS


# Any catalog's marker as it survives in raw (JSON) text.
_CATALOG_RAW: tuple[str, ...] = catalogs.RAW_MARKERS
# Each catalog marker as it survives in raw (JSON) text, with the marker itself.
_CATALOG_MARKERS: tuple[tuple[str, str], ...] = tuple(
    zip(catalogs.RAW_MARKERS, catalogs.MARKERS, strict=True)
)


def _has_any(text: str, markers: tuple[str, ...] | list[str]) -> bool:
    for marker in markers:  # noqa: SIM110 - a loop, not any(): no generator made for every text
        if marker in text:
            return True
    return False


_CHUNK = 16_384  # bytes in each piece of a remembered history


class _History:
    """A message history read before: a JSON array, or an object holding one under its first
    history key (``facts.HISTORY_KEYS``).  Kept as its UTF-8 bytes up to the array's closing
    bracket (``end``), in pieces of ``_CHUNK`` bytes compared in place with a later history's
    bytes, and the bytes from that bracket on (``tail``: "]" for an array).  One that
    continues it shares its whole pieces: remembering a continuation copies only what it
    adds."""

    __slots__ = ("chunks", "end", "tail")
    chunks: list[bytes]
    end: int
    tail: bytes

    def __init__(self, raw: Encoded, end: int, before: _History | None = None) -> None:
        self.end = end
        self.tail = raw.piece(end, len(raw))
        # ``raw`` continues ``before``: its whole pieces are this one's first.
        kept = before.end // _CHUNK if before is not None else 0
        shared: list[bytes] = before.chunks[:kept] if before is not None else []
        self.chunks = shared + [
            raw.piece(at, min(at + _CHUNK, end)) for at in range(kept * _CHUNK, end, _CHUNK)
        ]

    def starts(self, raw: Encoded) -> bool:
        """``raw``'s first ``self.end`` bytes are this history's."""
        at = 0
        for chunk in self.chunks:
            if not raw.has_at(chunk, at):
                return False
            at += len(chunk)
        return True


def _array_end(raw: Encoded, parsed: Any) -> int | None:
    """Where the message array of a history read whole closes in ``raw`` (``parsed``): its
    last byte for an array; for an object, the bracket that closes its first history key's
    array (a list), found where the rest of the object, parsed, is exactly the keys after
    it; None for anything else."""
    if isinstance(parsed, list):
        return len(raw) - 1
    if not isinstance(parsed, dict):
        return None
    key = next((k for k in facts.HISTORY_KEYS if parsed.get(k)), None)
    if key is None or not isinstance(parsed[key], list):
        return None
    keys = list(parsed)
    after = keys[keys.index(key) + 1 :]
    text = raw.piece(0, len(raw))
    if not after:  # "]", then "}", whitespace around them
        close = len(text.rstrip()) - 1
        bracket = len(text[:close].rstrip()) - 1
        return bracket if text[close] == _BRACE_CLOSE and text[bracket] == _CLOSE else None
    rest = {k: parsed[k] for k in after}
    follows = re.compile(rb"\]\s*,\s*(" + re.escape(json.dumps(after[0]).encode()) + rb")\s*:")
    for found in follows.finditer(text):
        try:
            if orjson.loads(b"{" + text[found.start(1) :]) == rest:
                return found.start()
        except orjson.JSONDecodeError:
            continue
    return None


def _remember(histories: list[_History], history: _History) -> None:
    histories.insert(0, history)
    del histories[_HISTORIES:]


MAX_UNREADABLE_NAMED = 20  # unreadable items named per session (all are counted)
_HISTORIES = 4  # message histories remembered per session (see ``_unread_part``); 0 reads each whole
_OPEN, _CLOSE, _COMMA, _BRACE, _BRACE_CLOSE = ord("["), ord("]"), ord(","), ord("{"), ord("}")
_ENDS = (_COMMA, _CLOSE)  # what may follow the text a history shares with one read before
_BRACKETS = ((_OPEN, _CLOSE), (_BRACE, _BRACE_CLOSE))  # a history's first and last bytes

K = TypeVar("K")
V = TypeVar("V")

_framework_cache: ByteCache[tuple[str, str], str] = register(ByteCache("frameworks", 1024 * 1024))


def framework_of(scope: str, service: str = "") -> str:
    """The framework an instrumentation scope names, else the resource's service name, else ""."""
    found = _framework_cache.get((scope, service), None)
    if found is None:
        found = facts.FRAMEWORK_SCOPE_NAMES.get(scope) or next(
            (fw for prefix, fw in facts.FRAMEWORK_SCOPES if scope.startswith(prefix)), ""
        )
        if not found and service:
            found = next((fw for prefix, fw in facts.FRAMEWORK_SERVICES if service.startswith(prefix)), "")
        _framework_cache.put((scope, service), found, text_bytes(scope) + text_bytes(service))
    return found


def _service(view: SpanView | LogView) -> str:
    return view.resource.attrs.text(facts.SERVICE_NAME_KEY) or ""


@dataclass(slots=True)
class _Seen:
    """Where a message-level signal was first seen."""

    trace_id: str
    span_id: str
    time_unix_nano: int


class SessionEvidence:
    __slots__ = (
        "_activated",
        "_active_skills",
        "_answers",
        "_content_seen",
        "_expected",
        "_histories",
        "_injected",
        "_last_prompts",
        "_links",
        "_log_calls",
        "_log_results",
        "_message_calls",
        "_message_results",
        "_rules",
        "_scanned",
        "_turn_texts",
        "_unnamed_activations",
        "agent_spans",
        "catalog",
        "framework",
        "model_seen",
        "skill_loads",
        "span_count",
        "tool_calls",
        "turns",
        "unreadable",
        "unreadable_count",
    )

    def __init__(self, rules: Rules = NO_RULES) -> None:
        self._rules = rules
        self.framework = ""
        self.span_count = 0
        self.tool_calls: list[ToolCall] = []
        self.skill_loads: list[SkillLoad] = []
        self.turns: list[Turn] = []
        self.catalog = Catalog()
        self.agent_spans: list[tuple[int, str, str]] = []  # (start, trace_id, span_id)
        self.model_seen = False  # a span in a GenAI convention (``facts.MODEL_ATTRIBUTE_PREFIXES``)
        self._content_seen = False
        self._turn_texts: set[str] = set()
        self._answers: list[tuple[int, str]] = []  # (end time, raw text) of recorded answers
        self._expected: dict[str, str] = {}  # folded -> as written
        # Hashes of text already read: raw prompt text scanned, (role, text) prompt fields,
        # ("catalog", text) catalogs parsed; tuples never hash like the bare text.
        self._scanned: set[int] = set()
        self._message_calls: dict[str, tuple[MessageCall, _Seen]] = {}
        self._message_results: dict[str, MessageResult] = {}
        self._injected: dict[str, tuple[Injection, _Seen]] = {}
        self._log_results: dict[str, tuple[bool, _Seen]] = {}  # tool call id -> success
        self._log_calls: list[log_calls.LoggedCall] = []  # tool calls that log records report
        # Span id -> parent span id of spans that record nothing but their place in the trace
        # (no attributes): how a log record logged deep under a tool call reaches its span.
        self._links: dict[bytes, bytes] = {}
        self._activated: dict[str, tuple[str, _Seen, bool]] = {}  # folded skill -> first activation, ok
        self._active_skills: list[tuple[int, str, str]] = []  # (time, trace id, skill) of requests
        self._unnamed_activations: list[tuple[_Seen, bool]] = []  # activations logged without a name
        self._last_prompts: dict[str, str] = {}  # role -> the last text of that role seen (read already)
        # Histories read, newest first, for each reader (``_unread_part``).
        self._histories: dict[str, list[_History]] = {}
        self.unreadable: list[UnreadableItem] = []  # the first ``MAX_UNREADABLE_NAMED``
        self.unreadable_count = 0

    # -- intake ---------------------------------------------------------------------------

    def observe_span(self, view: SpanView) -> None:
        self.span_count += 1
        span = view.span
        if not span.attributes:
            self._links[span.span_id] = span.parent_span_id
        if not self.framework:
            self.framework = framework_of(view.scope, _service(view))
        if self._rules.by_attribute or _EXPECTED in view.attrs or _EXPECTED in view.resource.attrs:
            self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs))
        if not self.model_seen:
            self.model_seen = any(k.startswith(facts.MODEL_ATTRIBUTE_PREFIXES) for k in view.attrs.keys())  # noqa: SIM118 - Attributes is no dict
        for event in view.events:
            if event.name in _EVENT_ACTIVATIONS:
                self._observe_activation_event(view, event)
        call = tool_call(view)
        if call is not None:
            self._observe_tool(call)
            return
        start = view.span.start_time_unix_nano
        if has_marker(view, facts.AGENT_SPAN_MARKERS):
            self.agent_spans.append((start, view.trace_id, view.span_id))
        for key in _CATALOG_NAMES:
            if key in view.attrs:
                names_text = view.attrs.text(key)
                if names_text and self._first_sight(("catalog", names_text)):
                    entries = catalogs.names_list(names_text)
                    if entries is not None:
                        self.catalog.advertise(entries, facts.CATALOG_NAMES_SHAPE)
        prompts = messages.prompt_fields(view)
        if prompts:
            self._content_seen = True
        # Not counted as content seen: an unknown key may hold anything, and tool definitions
        # are no conversation.  These are read for a catalog in their descriptions, and only
        # when they hold a catalog's marker (most hold none, and a walk of them costs).
        prompts += [("other", raw) for raw in messages.other_prompt_texts(view.attrs)]
        prompts += [tools for tools in messages.tool_definitions(view) if _has_any(tools[1], _CATALOG_RAW)]
        # Chat spans repeat the system prompt and the history so far: a (role, text) pair this
        # session has read already can add no turn, catalog, call or injection.
        fresh: list[tuple[str, str]] = []
        for role, raw in prompts:
            if isinstance(raw, Encoded):  # a history, or what may be one
                part = self._unread_part(raw, role)
                # A history read whole is remembered by hash like other text; a continuation
                # or a repeat was recognised by comparing bytes, without hashing all of them.
                if part is None:
                    part = raw.text()  # made already, and hashed (``parse_json``), if an array
                    if not self._first_sight((role, part)):
                        continue
                if part:
                    fresh.append((role, part))
            elif raw != self._last_prompts.get(role):
                # The same system prompt on every chat span: told by comparing it with the
                # last one, where a hash would read it all each time.
                self._last_prompts[role] = raw
                if self._first_sight((role, raw)):
                    fresh.append((role, raw))
        for text in messages.user_texts(view, fresh):
            if self._new_request(text):
                self.turns.append(Turn(text, view.span_id, view.trace_id, start))
        # Read when the session closes, and only the answers that end a turn: a chat span per
        # model call records one, and most are superseded by a later one in the same turn.
        # (Measured: 4 us a span saved, 12 KB more per open 50-span session; a raw answer is
        # part of its span, so memory stays within the span bytes the session received.)
        answer = messages.response_raw(view)
        if answer:
            self._answers.append((view.span.end_time_unix_nano, answer))
        if fresh:
            seen = _Seen(view.trace_id, view.span_id, view.span.start_time_unix_nano)
            for _, raw in fresh:
                self._scan(raw, seen)
        flattened = messages.flattened_blocks(view)
        if flattened:
            self._keep_blocks(flattened, _Seen(view.trace_id, view.span_id, view.span.start_time_unix_nano))

    def observe_log(self, view: LogView) -> None:
        if not self.framework:
            self.framework = framework_of(view.scope, _service(view))
        self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs))
        record = view.record
        seen = _Seen(
            record.trace_id.hex(),
            record.span_id.hex(),
            record.time_unix_nano or record.observed_time_unix_nano,
        )
        event = view.event_name.removeprefix(facts.LOG_EVENT_PREFIX)
        logged = log_calls.logged_call(view, event, seen.time_unix_nano)
        if logged is not None and logged.whole:
            self._observe_tool(logged.call)
        elif logged is not None:
            self._log_calls.append(logged)
        checked = log_calls.permission_check(view, seen.time_unix_nano)
        if checked is not None:
            self._log_calls.append(checked)
        prompt_key = facts.LOG_USER_PROMPTS.get(event)
        if prompt_key is not None:
            text = view.attrs.text(prompt_key)
            if text and self._new_request(text):
                self.turns.append(Turn(text, seen.span_id, seen.trace_id, seen.time_unix_nano))
        answer_key = facts.LOG_AGENT_RESPONSES.get(event)
        if answer_key is not None:
            answer = view.attrs.text(answer_key)
            if answer:
                self._answers.append((seen.time_unix_nano, answer))
        active_key = facts.LOG_ACTIVE_SKILL.get(event)
        if active_key is not None:
            active = names.decoded(view.attrs.text(active_key) or "")
            if active and active not in facts.REDACTED_SKILL_NAMES:
                self._active_skills.append((seen.time_unix_nano, seen.trace_id, active))
        if event in facts.LOG_SKILL_ACTIVATED:
            ok = all(
                str(view.attrs.get(key)).lower() != "false"
                for key in facts.LOG_SKILL_SUCCESS_KEYS
                if key in view.attrs
            )
            self._activation(view.attrs.text(facts.LOG_SKILL_ACTIVATED[event]), seen, ok)
        elif event in facts.LOG_TOOL_RESULTS:
            id_key, success_key = facts.LOG_TOOL_RESULTS[event]
            call_id = view.attrs.text(id_key)
            if call_id:
                self._log_results[call_id] = (str(view.attrs.get(success_key)).lower() == "true", seen)
        role = facts.LOG_MESSAGE_EVENTS.get(event)
        if role is not None:
            self._observe_logged_message(role, view.body, seen)
        # A request log record repeats the history so far: what this session read is skipped.
        for key in facts.LOG_CONTENT_ATTRIBUTES:
            if key in view.attrs:
                content = messages.encoded_text(view.attrs, key)
                if content:
                    self._content_seen = True
                    self._scan_unread(content, seen)
        for prompt in messages.other_prompt_texts(view.attrs):
            self._scan_unread(prompt, seen)

    def _scan_unread(self, raw: Encoded, seen: _Seen) -> None:
        """``_scan`` what a log record's ``raw`` holds that this session's log records have
        not (``_unread_part``)."""
        part = self._unread_part(raw, "log")
        if part is None:
            part = raw.text()
        if part:
            self._scan(part, seen)

    def _observe_activation_event(self, view: SpanView, event: EventView) -> None:
        """A skill's activation recorded as a span event (``facts.SPAN_EVENT_SKILL_ACTIVATED``),
        with the body the harness handed the model, when recorded, as that load's body."""
        name_key, body_key = _EVENT_ACTIVATIONS[event.name]
        attrs = event.attrs
        seen = _Seen(view.trace_id, view.span_id, event.time_unix_nano or view.span.start_time_unix_nano)
        skill = self._activation(attrs.text(name_key), seen, ok=True)
        body = attrs.text(body_key)
        if skill and body:
            injection = Injection(skill, body, None, follows_tool=True)
            self._injected.setdefault(fold_skill_name(skill), (injection, seen))

    def _observe_logged_message(self, role: str, body: Any, seen: _Seen) -> None:
        """One message of a model call, logged as a GenAI semconv event
        (``facts.LOG_MESSAGE_EVENTS``): a request, an answer, and catalogs, calls, results and
        injected bodies, as in a span's recorded messages.  A body without content (content
        capture off) records nothing."""
        message = (
            body.get(facts.LOG_CHOICE_MESSAGE_KEY) if role == "answer" and isinstance(body, dict) else body
        )
        if not isinstance(message, dict) or not any(message.get(key) for key in _LOGGED_MESSAGE_KEYS):
            return
        self._content_seen = True
        text = messages.message_text(first_present(message, facts.MESSAGE_BODY_KEYS))
        if role == "user" and text and self._new_request(text):
            self.turns.append(Turn(text, seen.span_id, seen.trace_id, seen.time_unix_nano))
        elif role == "answer" and text:
            self._answers.append((seen.time_unix_nano, text))
        self._scan(_json(message), seen)

    def note_unreadable(self, item: UnreadableItem) -> None:
        """An item of this session that could not be read: counted, the first few named."""
        self.unreadable_count += 1
        if len(self.unreadable) < MAX_UNREADABLE_NAMED:
            self.unreadable.append(item)

    def _activation(self, recorded: str | None, seen: _Seen, ok: bool) -> str:
        """A skill activation the harness recorded (a log record, a span event); returns the
        skill's name, "" when it has none or it was not recorded."""
        skill = names.decoded(recorded or "")
        if skill in facts.REDACTED_SKILL_NAMES:
            self._unnamed_activations.append((seen, ok))  # a skill, its name not recorded
            return ""
        if skill:
            self._activated.setdefault(fold_skill_name(skill), (skill, seen, ok))
        return skill

    def _expect(self, skills: Iterable[str]) -> None:
        for skill in skills:
            self._expected.setdefault(fold_skill_name(skill), skill)

    def _observe_tool(self, call: ToolCall) -> None:
        self.tool_calls.append(call)
        load = _load_of(call)
        if load is not None:
            self.skill_loads.append(load)
            listed = (
                catalogs.listed_in_error(call.error) if load.signal == "skill_tool" and call.error else None
            )
            if listed:
                self.catalog.advertise(listed, facts.CATALOG_ERROR_SHAPE)
            return
        if call.name in facts.CATALOG_TOOLS and call.result:
            self._scan(call.result, _Seen(call.trace_id, call.span_id, call.start_unix_nano))

    def _new_request(self, text: str) -> bool:
        """True the first time this session reads a user request (every later span repeats
        it); never for what a harness records in place of one (``facts.PLACEHOLDER_PROMPTS``)."""
        if text in self._turn_texts or text in facts.PLACEHOLDER_PROMPTS:
            return False
        self._turn_texts.add(text)
        return True

    def _first_sight(self, item: tuple[str, str]) -> bool:
        """True the first time this session reads ``item`` (tagged text, remembered by hash)."""
        digest = hash(item)
        if digest in self._scanned:
            return False
        self._scanned.add(digest)
        return True

    def _unread_part(self, raw: Encoded, reader: str) -> str | None:
        """The messages of a history that ``reader`` has not read yet in this session, as a
        JSON array ("" when it has read them all); None when ``raw`` is to be read whole (no
        history, or none that continues one it read before).  Readers take different things
        from a history (a span's messages give user turns, a log record's content does not),
        so what one has read is not read for another.

        Each chat span records the whole conversation so far, so reading every history whole
        costs the square of a session's length.  A history is a JSON array of messages, or an
        object holding one (``_History``).  When ``raw`` continues one read before (the same
        bytes up to that one's array's closing bracket, then a comma and more elements, then
        the same bytes from that bracket on), only the elements added are new: parsing is
        deterministic, so the shared text parses to the same values.  A few histories are
        remembered per session (sub-agents keep conversations of their own), each as pieces
        of its bytes: comparing bytes reads them once, where hashing or decoding them would
        cost more (decoding text that is not ASCII ~10x), and only the new part is decoded."""
        size = len(raw)
        if not size or (raw.byte(0), raw.byte(size - 1)) not in _BRACKETS:
            return None
        histories = self._histories.setdefault(reader, [])
        for history in histories:
            end, tail = history.end, history.tail  # where its array closes, and from there on
            rest = size - len(tail)  # where this one's array would close
            if (
                rest < end
                or raw.byte(end) not in _ENDS
                or not raw.has_at(tail, rest)
                or not history.starts(raw)
            ):
                continue
            if rest == end:
                return ""  # the same history again (a retried or duplicated span)
            if raw.byte(end) == _COMMA:
                unread = "[" + raw.text_from(end + 1, rest) + "]"
                if not isinstance(parse_json(unread), list):
                    return None
                _remember(histories, _History(raw, rest, history))
                return unread
        close = _array_end(raw, parse_json(raw.text()))
        if close is not None:
            _remember(histories, _History(raw, close))
        return None

    def _scan(self, raw: str, seen: _Seen) -> None:
        """Catalogs, message-level calls and injected bodies in one piece of prompt text.

        Each of the three walks over the decoded text runs only when the raw text holds one
        of its markers: a marker inside any decoded string is in the raw text too.
        """
        # A decoded string holds only the catalog markers the raw text holds: look for those.
        catalog_markers = [marker for in_raw, marker in _CATALOG_MARKERS if in_raw in raw]
        wants_catalog = bool(catalog_markers)
        wants_blocks = _has_any(raw, _BLOCK_MARKERS)
        wants_injections = _has_any(raw, _INJECTION_MARKERS)
        if not (wants_catalog or wants_blocks or wants_injections):
            return
        digest = hash(raw)
        if digest in self._scanned:
            return  # the same history, repeated on the next chat span
        self._scanned.add(digest)
        value = parse_json(raw)
        value = raw if value is None else value
        strings, found_blocks = transcript.strings_and_blocks(
            value, wants_catalog or wants_injections, wants_blocks
        )
        if wants_catalog:
            for text in strings:
                for marker in catalog_markers:  # usually one; in this loop, no call per string
                    if marker in text:
                        # The same catalog comes back inside every later history: parse it once.
                        if self._first_sight(("catalog", text)):
                            found = catalogs.find(text)
                            if found is not None:
                                self.catalog.advertise(found[1], found[0])
                        break
        if wants_blocks and found_blocks:
            self._keep_blocks(found_blocks, seen)
        if wants_injections:
            for injection in injections_in(strings):
                self._injected.setdefault(fold_skill_name(injection.skill), (injection, seen))

    def _keep_blocks(self, found: list[MessageCall | MessageResult], seen: _Seen) -> None:
        """The tool calls (and their results) of one piece of history that may load a skill.

        A call without an id (some providers' parts) is known by its tool, skill and position among
        such calls in this history, so the same call read again is kept once; its result is
        the next result of the same tool."""
        waiting: dict[str, list[str]] = {}  # tool -> id-less calls without a result yet
        positions: dict[tuple[str, str], int] = {}
        for block in found:
            if isinstance(block, MessageCall):
                call_id = block.call_id
                if not call_id:
                    at = (block.name, _call_skill(block))
                    positions[at] = positions.get(at, -1) + 1
                    call_id = f"{_NO_ID}{at[0]}:{at[1]}:{positions[at]}"
                    waiting.setdefault(block.name, []).append(call_id)
                    block = MessageCall(call_id, block.name, block.arguments)
                if _may_load(block):
                    self._message_calls.setdefault(call_id, (block, seen))
            else:
                call_id = block.call_id
                if not call_id:
                    queue = waiting.get(block.name)
                    call_id = queue.pop(0) if queue else ""
                if call_id:
                    self._message_results.setdefault(call_id, block)

    def absorb(self, other: SessionEvidence) -> None:
        """Take in the evidence of a provisional session that turned out to be part of this one."""
        self.span_count += other.span_count
        self.framework = self.framework or other.framework
        self.model_seen = self.model_seen or other.model_seen
        self.tool_calls += other.tool_calls
        self.skill_loads += other.skill_loads
        self.turns += [t for t in other.turns if t.user_message not in self._turn_texts]
        self._turn_texts |= other._turn_texts
        self._answers += other._answers
        self.agent_spans += other.agent_spans
        self._content_seen = self._content_seen or other._content_seen
        self.catalog.merge(other.catalog)
        self._scanned |= other._scanned
        for key, skill in other._expected.items():
            self._expected.setdefault(key, skill)
        _keep_first(self._message_calls, other._message_calls)
        _keep_first(self._message_results, other._message_results)
        _keep_first(self._injected, other._injected)
        _keep_first(self._log_results, other._log_results)
        # What the other read stays read: its histories continue here without a re-read.
        for reader, theirs in other._histories.items():
            self._histories[reader] = [*self._histories.get(reader, []), *theirs][:_HISTORIES]
        _keep_first(self._last_prompts, other._last_prompts)
        self._log_calls += other._log_calls
        self._links.update(other._links)
        _keep_first(self._activated, other._activated)
        self._active_skills += other._active_skills
        self._unnamed_activations += other._unnamed_activations
        self.unreadable_count += other.unreadable_count
        self.unreadable += other.unreadable[: max(0, MAX_UNREADABLE_NAMED - len(self.unreadable))]

    # -- closing --------------------------------------------------------------------------

    def finish(self, session_id: str, revision: int, close_reason: str) -> Session:
        """The session as evaluators see it, a snapshot.  Leaves this object as it was, so a
        session reopened by late spans goes on accumulating and can be finished again, and
        the Session already handed out (its judge calls may still run) does not change."""
        kept = self.skill_loads, self.turns, self.tool_calls, self.catalog
        self.skill_loads = [replace(load) for load in kept[0]]
        self.turns = [replace(turn) for turn in kept[1]]
        self.tool_calls = list(kept[2])
        self.catalog = replace(kept[3], skills=dict(kept[3].skills))
        try:
            return self._finish(session_id, revision, close_reason)
        finally:
            self.skill_loads, self.turns, self.tool_calls, self.catalog = kept

    def _finish(self, session_id: str, revision: int, close_reason: str) -> Session:
        self._merge_split_calls()
        self._complete_from_log_calls(checks=False)
        # What a permission check names (a skill, a path, a command) is what the call asked
        # for, not content the harness recorded: the session's content capture is read before.
        content_capture = self._content_capture()
        self._complete_from_log_calls(checks=True)
        self._settle_from_records()
        self._name_from_requests()
        self._attach_injections()
        self._add_message_calls()
        self._keep_names()
        self.turns.sort(key=lambda t: t.start_unix_nano)
        self._merge_restated_turns()
        self._answer_turns()
        self.tool_calls.sort(key=lambda c: c.start_unix_nano)
        self.skill_loads.sort(key=lambda s: s.time_unix_nano)
        expected = dict(self._expected)
        for skill in self._rules.from_messages([t.user_message for t in self.turns]):
            expected.setdefault(fold_skill_name(skill), skill)
        first_agent = min(self.agent_spans) if self.agent_spans else None
        return Session(
            session_id=session_id,
            revision=revision,
            framework=self.framework or "unknown",
            turns=self.turns,
            tool_calls=self.tool_calls,
            skill_loads=self.skill_loads,
            catalog=self.catalog,
            expected_skills=list(expected.values()),
            content_capture=content_capture,
            first_agent_span=(first_agent[1], first_agent[2]) if first_agent else None,
            span_count=self.span_count,
            close_reason=close_reason,
            unreadable=list(self.unreadable),
            unreadable_count=self.unreadable_count,
        )

    def _merge_restated_turns(self) -> None:
        """A request that holds the one kept before it, in the same trace, with no answer
        in between, restates it (a framework handing a task down its layers, each span
        recording the request anew): one turn, the first."""
        kept: list[Turn] = []
        for turn in self.turns:
            last = kept[-1] if kept else None
            if (
                last is not None
                and turn.trace_id == last.trace_id
                and last.user_message in turn.user_message
                and not any(last.start_unix_nano <= end < turn.start_unix_nano for end, _ in self._answers)
            ):
                continue
            kept.append(turn)
        self.turns = kept

    def _answer_turns(self) -> None:
        """Each turn's answer: the latest recorded answer before the next turn began (of
        answers that end together, the one that arrived last)."""
        answers = sorted(self._answers, key=lambda answer: answer[0])
        for i, turn in enumerate(self.turns):
            until = self.turns[i + 1].start_unix_nano if i + 1 < len(self.turns) else None
            window = [
                raw for end, raw in answers if end >= turn.start_unix_nano and (until is None or end < until)
            ]
            for raw in reversed(window):
                text = messages.answer_text(raw)
                if text:
                    turn.response = text
                    break

    def _content_capture(self) -> ContentCapture:
        """Whether the session's tool calls came with their content: "present" when any call's
        arguments or result are known (from its span, or the log record that reported it)."""
        if self.tool_calls:
            return "present" if any(_has_content(c) for c in self.tool_calls) else "missing"
        # No tool ran.  With no prompt content either, silence proves nothing.
        return "no_tools" if self._content_seen or self.turns else "missing"

    def _merge_split_calls(self) -> None:
        """One call that two tool spans recorded (a harness's own span beside its framework's:
        the same call id and tool, at most one of them with arguments or result) is one call:
        each part taken from the span that has it, detected once.  Two spans that both hold
        content stay two calls (the same call re-sent as new spans)."""
        first: dict[tuple[str, str], int] = {}
        merged: list[ToolCall] = []
        split: set[tuple[str, str]] = set()  # (trace id, span id) of the spans merged
        for call in self.tool_calls:
            at = first.get((call.call_id, call.name)) if call.call_id else None
            if at is not None and _has_content(merged[at]) and _has_content(call):
                at = None  # two full records (a call re-sent as new spans): two calls, as sent
            if at is None:
                if call.call_id:
                    first[(call.call_id, call.name)] = len(merged)
                merged.append(call)
                continue
            split |= {(merged[at].trace_id, merged[at].span_id), (call.trace_id, call.span_id)}
            merged[at] = _combined(merged[at], call)
        if not split:
            return
        self.tool_calls = merged
        self.skill_loads = [load for load in self.skill_loads if (load.trace_id, load.span_id) not in split]
        for call in merged:
            load = _load_of(call) if (call.trace_id, call.span_id) in split else None
            if load is not None:
                self.skill_loads.append(load)

    def _complete_from_log_calls(self, checks: bool) -> None:
        """Tool calls as log records complete them: a tool span's missing arguments and error,
        or a call that never ran as a span.  A call the harness logged as succeeded with no
        recorded result is loaded, as a logged tool result settles one.  ``checks``: the
        logged permission checks, else the other logged calls."""
        logged = [entry for entry in self._log_calls if entry.inside == checks]
        for index, done in log_calls.completions(self.tool_calls, logged, self._ancestors):
            if index is not None:
                old = self.tool_calls[index]
                self.tool_calls[index] = done.call
                self.skill_loads = [
                    load
                    for load in self.skill_loads
                    if not (load.span_id == old.span_id and load.trace_id == old.trace_id)
                ]
            else:
                self.tool_calls.append(done.call)
            load = _load_of(done.call)
            if load is not None:
                if load.status == "unresolved" and done.succeeded:
                    load.status = "loaded"
                self.skill_loads.append(load)

    def _ancestors(self, span_id: str) -> list[str]:
        """The span ``span_id`` (hex) and its ancestors up through spans that record nothing
        but their parent (``_links``), nearest first; the first one that records something
        (or is not known) ends the list."""
        chain = [span_id]
        at = bytes.fromhex(span_id)
        while at in self._links and len(chain) < _MAX_ANCESTORS:
            at = self._links[at]
            if not at:
                break
            chain.append(at.hex())
        return chain

    def _settle_from_records(self) -> None:
        """A tool span with no recorded result, settled by what else the harness recorded: a
        logged tool result, or the skill's activation (a log record, a span event)."""
        for load in self.skill_loads:
            if load.status != "unresolved":
                continue
            logged = self._log_results.get(load.tool_call_id or "")
            if logged is not None:
                load.status = "loaded" if logged[0] else "failed"
            elif load.key in self._activated:
                load.status = "loaded" if self._activated[load.key][2] else "failed"
        # An activation recorded with no tool span at all (traces not exported, or sampled
        # out, or a skill the user invoked); one without a name, where no skill call of its
        # trace stands for it.
        called = {load.trace_id for load in self.skill_loads if load.signal == "skill_tool"}
        spanned = {load.key for load in self.skill_loads}
        activations = [
            ("", seen, ok) for seen, ok in self._unnamed_activations if seen.trace_id not in called
        ]
        activations += [
            (skill, seen, ok) for key, (skill, seen, ok) in self._activated.items() if key not in spanned
        ]
        for skill, seen, ok in activations:
            self.skill_loads.append(
                SkillLoad(
                    skill=skill,
                    status="loaded" if ok else "failed",
                    signal="log_event",
                    span_id=seen.span_id,
                    trace_id=seen.trace_id,
                    time_unix_nano=seen.time_unix_nano,
                )
            )

    def _attach_injections(self) -> None:
        """An injected body that follows a skill's activation (a skill tool call, or one the
        harness logged, as for a skill the user invoked) is that load's body; any other is a
        load of its own, unless it repeats a load's body."""
        for key, (injection, seen) in self._injected.items():
            after_call = [
                load
                for load in self.skill_loads
                if load.key == key and load.signal in _ACTIVATIONS and load.status in ("loaded", "unresolved")
            ]
            if injection.follows_tool and after_call:
                for load in after_call:
                    load.status = "loaded"
                    load.body = load.body or injection.body or None
                continue
            if injection.body and any(
                load.key == key and load.body and injection.body in load.body for load in self.skill_loads
            ):
                continue  # a load's own result, seen again in a later request's history
            self.skill_loads.append(
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

    def _name_from_requests(self) -> None:
        """A skill activation (a tool call, or a logged one) that recorded no name takes the
        one the next model request of its trace ran under (``facts.LOG_ACTIVE_SKILL``)."""
        if not self._active_skills:
            return
        requests = sorted(self._active_skills)
        for load in self.skill_loads:
            if load.skill or load.signal not in _ACTIVATIONS or load.status == "failed":
                continue
            after = next(
                (
                    skill
                    for at, trace, skill in requests
                    if trace == load.trace_id and at >= load.time_unix_nano
                ),
                None,
            )
            if after is not None:
                load.skill = after

    def _keep_names(self) -> None:
        """A value that is no skill name is not reported as one (``names.plausible``, the
        catalog's names allowed whatever their case), and loads nothing.  A load whose name
        was not recorded (a harness told not to record arguments) loaded some skill, which
        one unknown: unresolved, never loaded."""
        for load in self.skill_loads:
            if load.skill and not names.plausible(load.skill, self.catalog.skills):
                load.message = load.message or f"not a skill name: {load.skill[:200]!r}"
                load.skill = ""
                if load.status == "loaded":
                    load.status = "failed"
            elif not load.skill and load.status == "loaded":
                load.status, load.message = "unresolved", load.message or _NAME_NOT_RECORDED

    def _add_message_calls(self) -> None:
        """Calls seen only in histories: skill calls the harness never ran as tools (denied,
        invalid), and reads whose span was not exported.  A call a span recorded too is
        the span's: by call id, or by skill when the history has no ids."""
        span_call_ids = {c.call_id for c in self.tool_calls if c.call_id}
        span_skills = {load.key for load in self.skill_loads if load.signal == "skill_tool"}
        span_reads = {(load.signal, load.key): load for load in self.skill_loads}
        by_call_id = {load.tool_call_id: load for load in self.skill_loads if load.tool_call_id}
        for call_id, (call, seen) in self._message_calls.items():
            key = skill_tools.argument_key(call.name)
            on_span = call_id in span_call_ids
            if key is None:
                read = self._history_read(call_id, call, seen)
                if read is None:
                    continue
                # The span or log record of the same call (by id, else by what it read).
                same = by_call_id.get(call_id) if on_span else span_reads.get((read.signal, read.key))
                if same is None and not on_span:
                    span_reads[(read.signal, read.key)] = read
                    self.skill_loads.append(read)
                elif same is not None and same.status == "unresolved" and read.status != "unresolved":
                    # The span kept no outcome; the history shows what the read returned.
                    same.status, same.message, same.body, same.body_cut = (
                        read.status,
                        read.message,
                        read.body,
                        read.body_cut,
                    )
                elif (
                    same is not None
                    and read.status == same.status == "loaded"
                    and read.body
                    and not same.body
                ):
                    same.body = read.body  # the span kept no result; the history shows what it returned
                continue
            if on_span:
                continue
            arguments = call.arguments
            skill = names.decoded(skill_tools.skill_argument(arguments, key))
            if fold_skill_name(skill) in span_skills and skill:
                continue  # a tool span recorded it; this harness just puts no call id on spans
            result = self._message_results.get(call_id)
            status: LoadStatus
            message: str | None
            body = None
            if result is None:
                status, message = "unresolved", None
            else:
                status, message = text_outcome(result.text, _parsed(result), result.is_error)
                if status == "loaded" and facts.DENIALS.search(result.text):
                    status, message = "denied", result.text[:500]
                elif status == "loaded":
                    body = skill_tools.body_of(result.text, skill)
            span_skills.add(fold_skill_name(skill))
            self.skill_loads.append(
                SkillLoad(
                    skill=skill,
                    status=status,
                    signal="chat_message",
                    span_id=seen.span_id,
                    trace_id=seen.trace_id,
                    time_unix_nano=seen.time_unix_nano,
                    body=body,
                    message=message,
                    tool_call_id=None if call_id.startswith(_NO_ID) else call_id,
                )
            )

    def _history_read(self, call_id: str, call: MessageCall, seen: _Seen) -> SkillLoad | None:
        """A SKILL.md read that only a history shows, read as its tool span would be."""
        result = self._message_results.get(call_id)
        if result is None:
            return None  # no outcome: nothing to tell a read from a write
        arguments = call.arguments if isinstance(call.arguments, str) else _json(call.arguments)
        as_span = ToolCall(
            name=call.name,
            span_id=seen.span_id,
            trace_id=seen.trace_id,
            start_unix_nano=seen.time_unix_nano,
            call_id=None if call_id.startswith(_NO_ID) else call_id,
            arguments=arguments,
            result=result.text
            if result.value is None or isinstance(result.value, str)
            else _json(result.value),
            error=result.text or "the tool reported an error" if result.is_error else None,
        )
        for detect in _READ_DETECTORS:
            load = detect(as_span)
            if load is not None:
                return load
        return None


_NO_ID = "#"  # starts the key of a history call recorded without an id
_MAX_ANCESTORS = 64  # a chain of links this long is cut (a cycle, or a very deep trace)
_ACTIVATIONS = ("skill_tool", "log_event")  # loads that activate a skill: a tool call, a logged activation
_NAME_NOT_RECORDED = "the skill's name was not recorded"


def _load_of(call: ToolCall) -> SkillLoad | None:
    """The skill load a tool call records, by the first detector that claims it."""
    for detect in DETECTORS:
        load = detect(call)
        if load is not None:
            return load
    return None


def _has_content(call: ToolCall) -> bool:
    return call.arguments is not None or call.result is not None


def _combined(one: ToolCall, other: ToolCall) -> ToolCall:
    """Two spans' records of one call as one: the span with content first, the other filling
    in what it lacks; an error either recorded stands."""
    if not _has_content(one):
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


def _call_skill(call: MessageCall) -> str:
    """The skill a history call names, as far as its arguments tell (for keying)."""
    key = skill_tools.argument_key(call.name)
    arguments = call.arguments
    if key is not None:
        return names.decoded(skill_tools.skill_argument(arguments, key))
    return _json(arguments) if arguments is not None and not isinstance(arguments, str) else arguments or ""


def _may_load(call: MessageCall) -> bool:
    """Whether a history call may be a skill load: a skill tool, or arguments naming a
    SKILL.md (read by whatever tool)."""
    if skill_tools.argument_key(call.name) is not None:
        return True
    arguments = call.arguments
    text = arguments if isinstance(arguments, str) else _json(arguments) if arguments is not None else ""
    return facts.HISTORY_CALL_MARKER in text


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _parsed(result: MessageResult) -> object:
    value = result.value
    return value if isinstance(value, (dict, list)) else parse_json(value) if isinstance(value, str) else None


def _keep_first(mine: dict[K, V], theirs: dict[K, V]) -> None:
    for key, value in theirs.items():
        mine.setdefault(key, value)


__all__ = ["SessionEvidence", "framework_of", "result_text"]
