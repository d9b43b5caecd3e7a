"""Per-session evidence, built incrementally as each span or log record arrives.

``observe_span`` and ``observe_log`` run once per item on the hot path: they classify it
with cheap attribute checks, hand tool calls to the signal detectors (``detectors``), and
scan prompt text only when a marker says it may hold something.  ``finish`` hands what they
gathered to the passes at close (``closing``), which reconcile what only makes sense
together, and returns the ``Session`` evaluators read.  Histories read before are
remembered by ``histories``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from collector.detect import (
    catalog_shapes,
    catalogs,
    closing,
    frameworks,
    history_calls,
    log_calls,
    messages,
    names,
    plans,
    readings,
    transcript,
)
from collector.detect.closing import json_text
from collector.detect.content import (
    first_present,
    marked,
    parse_json,
    result_text,
    shaped_call,
    tool_call,
)
from collector.detect.content import tool_description as tool_description_of
from collector.detect.detectors import load_of
from collector.detect.expectations import EXPECTED_SKILLS_ATTRIBUTE as _EXPECTED
from collector.detect.expectations import NO_RULES, Expected, Rules
from collector.detect.facts import frameworks as framework_facts
from collector.detect.facts import logs as log_facts
from collector.detect.facts import prompts as prompt_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.detect.gathered import Gathered, Seen
from collector.detect.histories import Histories
from collector.detect.seldom import NOTHING, Seldom, keep_first
from collector.detect.transcript import Injection, MessageCall, MessageResult
from collector.detect.user_request import user_request
from collector.otlp.views import Encoded, EventView, LogView, SpanView
from evaluators.evidence import Catalog, Session, SkillLoad, ToolCall, Turn, UnreadableItem, fold_skill_name

_EVENT_ACTIVATIONS = log_facts.SPAN_EVENT_SKILL_ACTIVATED
_LOGGED_MESSAGE_KEYS = (*prompt_facts.MESSAGE_BODY_KEYS, log_facts.LOG_MESSAGE_CALLS_KEY)
# Any catalog's marker as it survives in raw (JSON) text.
_CATALOG_RAW: tuple[str, ...] = catalogs.RAW_MARKERS
_cued = catalog_shapes.cued
_has_any = readings.has_any


class SessionEvidence:
    __slots__ = (
        "_answers",
        "_content_seen",
        "_framework_shape",
        "_last_prompts",
        "_message_calls",
        "_message_results",
        "_records",
        "_rules",
        "_scanned",
        "_seldom",
        "_turn_texts",
        "_unnamed",
        "agent_spans",
        "catalog",
        "framework",
        "histories",
        "model_seen",
        "skill_loads",
        "span_count",
        "tool_calls",
        "turns",
    )

    def __init__(self, rules: Rules = NO_RULES) -> None:
        self._rules = rules
        self.framework = ""  # as the table names it
        self._framework_shape = ""  # as the telemetry names itself (``frameworks.by_shape``)
        self._unnamed: tuple[str, str] | None = None  # (scope, service) the table does not name
        self.span_count = 0
        self.tool_calls: list[ToolCall] = []
        self.skill_loads: list[SkillLoad] = []
        self.turns: list[Turn] = []
        self.catalog = Catalog()
        self.agent_spans: list[tuple[int, str, str]] = []  # (start, trace_id, span_id)
        self.model_seen = False  # a span in a GenAI convention (``tool_span_facts.MODEL_ATTRIBUTE_PREFIXES``)
        self._content_seen = False
        self._turn_texts: set[str] = set()
        self._answers: list[tuple[int, str]] = []  # (end time, raw text) of recorded answers
        # Hashes of text already read: raw prompt text scanned, (role, text) prompt fields,
        # ("catalog", text) catalogs parsed; tuples never hash like the bare text.
        self._scanned: set[int] = set()
        self._message_calls: dict[str, tuple[MessageCall, Seen]] = {}
        self._message_results: dict[str, MessageResult] = {}
        self._last_prompts: dict[str, str] = {}  # role -> the last text of that role seen (read already)
        self.histories = Histories()  # histories read, newest first, for each reader
        self._seldom: Seldom | None = None  # what few sessions gather (``seldom``), once one does
        self._records = 0  # log records observed

    # -- intake ---------------------------------------------------------------------------

    def observe_span(self, view: SpanView) -> None:
        self.span_count += 1
        span = view.span
        if not span.attributes:
            self._more().links[span.span_id] = span.parent_span_id
        if not self.framework:
            self._name_framework(view, view.name)
        plan = plans.plan_of(view.attrs)  # what the span's keys alone decide
        if self._rules.by_attribute or plan.expected or _EXPECTED in view.resource.attrs:
            where = (f"span {view.span.name!r} ({view.span_id})", f"the resource of span {view.span_id}")
            self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs, where=where))
        if not self.model_seen:
            self.model_seen = plan.model
        events = messages.named_events(span) if span.events else _NO_EVENTS
        if events:
            for position, (name, event) in enumerate(events):
                if name in _EVENT_ACTIVATIONS:
                    self._observe_activation_event(view, EventView(position, event))
        if plan.tool_marked or (plan.tool_markers and marked(view.attrs, plan.tool_markers)):
            call = tool_call(view, plan.tool_markers, plan.shaped_tool, marked=True)
        elif plan.shaped_tool is not None:
            call = shaped_call(view, plan.shaped_tool)  # what ``tool_call`` reads of a span no marker marks
        else:
            call = None  # neither a marker nor a tool call's keys: no tool call
        if call is not None:
            self._observe_tool(call)
            self._tool_description(view, plan)
            return
        start = view.span.start_time_unix_nano
        if plan.agent_markers and marked(view.attrs, plan.agent_markers):
            self.agent_spans.append((start, view.trace_id, view.span_id))
        if plan.reads_nothing and plans.SKIP_EMPTY and not events:
            return  # no key below reads anything (``plans.SpanPlan.reads_nothing``)
        for key in plan.catalog_names:
            names_text = view.attrs.text(key)
            if names_text and self._first_sight(("catalog", names_text)):
                entries = catalogs.names_list(names_text)
                if entries is not None:
                    self.catalog.advertise(entries, skill_tool_facts.CATALOG_NAMES_SHAPE)
        prompts, answer = messages.span_fields(view, plan, events)
        if prompts:
            self._content_seen = True
        # Not counted as content seen: an unknown key may hold anything, and tool definitions
        # are no conversation.  These are read for a catalog in their descriptions, and only
        # when they hold a catalog's marker (most hold none, and a walk of them costs).
        for other in messages.other_prompt_texts(view.attrs, plan) if plan.others else ():
            prompts.append(("other", other))  # a loop: most spans add none, and a list costs a call
        for given in messages.input_texts(view.attrs, plan) if plan.inputs else ():
            prompts.append((messages.INPUT, given))
        if plan.tool_definitions:
            prompts += [
                tools for tools in messages.tool_definitions(view, plan) if _has_any(tools[1], _CATALOG_RAW)
            ]
        # Chat spans repeat the system prompt and the history so far: a (role, text) pair this
        # session has read already can add no turn, catalog, call or injection.
        fresh: list[tuple[str, str]] = []
        scanned, last_prompts = self._scanned, self._last_prompts
        for role, raw in prompts:
            if isinstance(raw, Encoded):  # a history, or what may be one
                if raw.end - raw.start == 2 and raw.has_at(_EMPTY_OBJECT, 0):
                    continue  # an empty object: no message, and no history to remember
                part = self.histories.unread_part(raw, role)
                # A history read whole is remembered by hash like other text; a continuation
                # or a repeat was recognised by comparing bytes, without hashing all of them.
                if part is None:
                    part = raw.text()  # made already, and hashed (``parse_json``), if an array
                    digest = hash((role, part))  # ``_first_sight``, inline
                    if digest in scanned:
                        continue
                    scanned.add(digest)
                if part:
                    fresh.append((role, part))
            elif raw != last_prompts.get(role):
                # The same system prompt on every chat span: told by comparing it with the
                # last one, where a hash would read it all each time.
                last_prompts[role] = raw
                digest = hash((role, raw))  # ``_first_sight``, inline
                if digest not in scanned:
                    scanned.add(digest)
                    fresh.append((role, raw))
        # Read when the session closes, and only the answers that end a turn: a chat span per
        # model call records one, and most are superseded by a later one in the same turn.
        # (Measured: 4 us a span saved, 12 KB more per open 50-span session; a raw answer is
        # part of its span, so memory stays within the span bytes the session received.)
        if answer:
            self._answers.append((view.span.end_time_unix_nano, answer))
        if not (fresh or plan.flattened):
            return  # no text below to read: user turns come from fresh text and flattened keys
        # What the fresh text holds is read first (reading changes nothing), so that a span
        # whose text holds no request, and nothing a scan reads, stops before its ids are made.
        inputs = [p for p in fresh if p[0] == messages.INPUT] if plan.inputs else None
        asked = messages.user_texts(view, inputs, flattened=False, plan=plan) if inputs else ()
        texts = messages.user_texts(
            view, [p for p in fresh if p[0] != messages.INPUT] if inputs else fresh, plan=plan
        )
        known = self._rules.known_skills
        scans: list[tuple[str, readings.Plan]] = []
        for _, raw in fresh:
            scan = readings.plan(raw)
            if scan.catalog_markers or scan.shaped_catalog or scan.blocks or scan.injections or known:
                scans.append((raw, scan))  # the text may hold something (``_scan``'s first test)
        flattened = messages.flattened_blocks(view, plan) if plan.flattened else None
        if not (asked or texts or scans or flattened):
            return
        seen = Seen(view.trace_id, view.span_id, start)
        for text in asked:
            request = user_request(text)  # read only where no table's field names a request
            if request and all(t.user_message != request for t in (self._seldom or NOTHING).input_turns):
                self._more().input_turns.append(
                    Turn(request, seen.span_id, seen.trace_id, start, source=_FROM_SPAN)
                )
        for text in texts:
            request = self._new_request(text, seen)
            if request:
                self.turns.append(Turn(request, seen.span_id, seen.trace_id, start, source=_FROM_SPAN))
        for raw, scan in scans:
            self._scan(raw, seen, scan)
        if flattened:  # the calls that may load a skill, and their results
            history_calls.keep(flattened, seen, self._message_calls, self._message_results)

    def observe_log(self, view: LogView) -> None:
        self._records += 1
        if not self.framework:
            self._name_framework(view, "")
        where = (f"a log record of trace {view.record.trace_id.hex()}", "a log record's resource")
        self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs, where=where))
        record = view.record
        seen = Seen(
            record.trace_id.hex(),
            record.span_id.hex(),
            record.time_unix_nano or record.observed_time_unix_nano,
        )
        event = view.event_name.removeprefix(log_facts.LOG_EVENT_PREFIX)
        logged = log_calls.logged_call(view, event, seen.time_unix_nano)
        if logged is not None and logged.whole:
            self._observe_tool(logged.call)
        elif logged is not None:
            self._more().log_calls.append(logged)
        checked = log_calls.permission_check(view, seen.time_unix_nano)
        if checked is not None:
            self._more().log_calls.append(checked)
        prompt_key = log_facts.LOG_USER_PROMPTS.get(event)
        if prompt_key is not None:
            request = self._new_request(view.attrs.text(prompt_key) or "")
            if request:
                self.turns.append(
                    Turn(request, seen.span_id, seen.trace_id, seen.time_unix_nano, source=_FROM_LOG_PROMPT)
                )
        answer_key = log_facts.LOG_AGENT_RESPONSES.get(event)
        if answer_key is not None:
            answer = view.attrs.text(answer_key)
            if answer:
                self._answers.append((seen.time_unix_nano, answer))
        active_key = log_facts.LOG_ACTIVE_SKILL.get(event)
        if active_key is not None:
            active = names.decoded(view.attrs.text(active_key) or "")
            if active and active not in log_facts.REDACTED_SKILL_NAMES:
                self._more().active_skills.append((seen.time_unix_nano, seen.trace_id, active))
        if event in log_facts.LOG_SKILL_ACTIVATED:
            ok = all(
                str(view.attrs.get(key)).lower() != "false"
                for key in log_facts.LOG_SKILL_SUCCESS_KEYS
                if key in view.attrs
            )
            self._activation(view.attrs.text(log_facts.LOG_SKILL_ACTIVATED[event]), seen, ok)
        elif event in log_facts.LOG_TOOL_RESULTS:
            id_key, success_key = log_facts.LOG_TOOL_RESULTS[event]
            call_id = view.attrs.text(id_key)
            if call_id:
                self._more().log_results[call_id] = (str(view.attrs.get(success_key)).lower() == "true", seen)
        role = log_facts.LOG_MESSAGE_EVENTS.get(event)
        if role is not None:
            self._observe_logged_message(role, view.body, seen)
        # A request log record repeats the history so far: what this session read is skipped.
        for key in log_facts.LOG_CONTENT_ATTRIBUTES:
            if key in view.attrs:
                content = messages.encoded_text(view.attrs, key)
                if content:
                    self._content_seen = True
                    self._scan_unread(content, seen)
        for prompt in messages.other_prompt_texts(view.attrs):
            self._scan_unread(prompt, seen)

    def _name_framework(self, view: SpanView | LogView, span_name: str) -> None:
        """The framework by the table; until one is named, the first name by shape."""
        service = view.resource.attrs.text(framework_facts.SERVICE_NAME_KEY) or ""
        by_span = framework_facts.FRAMEWORK_SPAN_NAMES.get(span_name, "")
        if self._framework_shape and (view.scope, service) == self._unnamed:
            self.framework = by_span  # the table names neither this scope nor this service
            return
        self.framework = frameworks.known(view.scope, service) or by_span
        self._unnamed = None if self.framework else (view.scope, service)
        if not self.framework and not self._framework_shape:
            attrs = view.resource.attrs
            sdk = next((attrs.text(key) or "" for key in frameworks.sdk_keys() if key in attrs), "")
            self._framework_shape = frameworks.by_shape(view.scope, service, sdk, span_name)

    def _scan_unread(self, raw: Encoded, seen: Seen) -> None:
        """``_scan`` what a log record's ``raw`` holds that this session's log records have
        not (``Histories.unread_part``)."""
        part = self.histories.unread_part(raw, "log")
        if part is None:
            part = raw.text()
        if part:
            self._scan(part, seen)

    def _observe_activation_event(self, view: SpanView, event: EventView) -> None:
        """A skill's activation recorded as a span event (``log_facts.SPAN_EVENT_SKILL_ACTIVATED``),
        with the body the harness handed the model, when recorded, as that load's body."""
        name_key, body_key = _EVENT_ACTIVATIONS[event.name]
        attrs = event.attrs
        seen = Seen(view.trace_id, view.span_id, event.time_unix_nano or view.span.start_time_unix_nano)
        skill = self._activation(attrs.text(name_key), seen, ok=True)
        body = attrs.text(body_key)
        if skill and body:
            injection = Injection(skill, body, None, follows_tool=True)
            self._more().injected.setdefault(fold_skill_name(skill), (injection, seen))

    def _observe_logged_message(self, role: str, body: Any, seen: Seen) -> None:
        """One message of a model call, logged as a GenAI semconv event
        (``log_facts.LOG_MESSAGE_EVENTS``): a request, an answer, and catalogs, calls, results and
        injected bodies, as in a span's recorded messages.  A body without content (content
        capture off) records nothing.  A body written as the message's JSON text (Semantic
        Kernel) is that message."""
        if isinstance(body, str) and body.startswith("{"):
            body = parse_json(body)
        message = (
            body.get(log_facts.LOG_CHOICE_MESSAGE_KEY)
            if role == "answer" and isinstance(body, dict)
            else body
        )
        if not isinstance(message, dict) or not any(message.get(key) for key in _LOGGED_MESSAGE_KEYS):
            return
        self._content_seen = True
        text = messages.message_text(first_present(message, prompt_facts.MESSAGE_BODY_KEYS))
        request = self._new_request(text) if role == "user" else ""
        if request:
            self.turns.append(
                Turn(request, seen.span_id, seen.trace_id, seen.time_unix_nano, source=_FROM_LOG_MESSAGE)
            )
        elif role == "answer" and text:
            self._answers.append((seen.time_unix_nano, text))
        self._scan(json_text(message), seen)

    def _more(self) -> Seldom:
        """This session's ``Seldom``, made on first need."""
        seldom = self._seldom
        if seldom is None:
            seldom = self._seldom = Seldom()
        return seldom

    def note_unreadable(self, item: UnreadableItem) -> None:
        """An item of this session that could not be read: counted, the first few named."""
        self._more().note_unreadable(item)

    def _activation(self, recorded: str | None, seen: Seen, ok: bool) -> str:
        """A skill activation the harness recorded (a log record, a span event); returns the
        skill's name, "" when it has none or it was not recorded."""
        skill = names.decoded(recorded or "")
        if skill in log_facts.REDACTED_SKILL_NAMES:
            self._more().unnamed_activations.append((seen, ok))  # a skill, its name not recorded
            return ""
        if skill:
            self._more().activated.setdefault(fold_skill_name(skill), (skill, seen, ok))
        return skill

    def _expect(self, found: Iterable[Expected]) -> None:
        for expected in found:
            self._more().expected.setdefault(fold_skill_name(expected.skill), expected)

    def _observe_tool(self, call: ToolCall) -> None:
        self.tool_calls.append(call)
        load = load_of(call)
        if load is not None:
            self.skill_loads.append(load)
            listed = (
                catalogs.listed_in_error(call.error) if load.signal == "skill_tool" and call.error else None
            )
            if listed:
                self.catalog.advertise(listed, tool_span_facts.CATALOG_ERROR_SHAPE)
            return
        if call.name in skill_tool_facts.CATALOG_TOOLS and call.result:
            self._scan(call.result, Seen(call.trace_id, call.span_id, call.start_unix_nano))
        elif call.result and _cued(call.name):
            # A tool the table does not know whose name says "skill": its result may list them.
            listed = catalog_shapes.json_list_entries(parse_json(call.result))
            if listed:
                self.catalog.advertise(listed, catalog_shapes.SHAPE)
            else:
                self._catalog_in(result_text(call), [], self._known_in(call.result))

    def _tool_description(self, view: SpanView, span_plan: plans.SpanPlan) -> None:
        """A catalog in the description of a tool span's tool (repeated on every call)."""
        text = tool_description_of(view, span_plan.shaped_tool)
        if not text or text == self._last_prompts.get(_TOOL_DESCRIPTION):
            return
        self._last_prompts[_TOOL_DESCRIPTION] = text
        plan = readings.plan(text)
        if plan.catalog_markers or plan.shaped_catalog:
            self._catalog_in(text, plan.catalog_markers, self._known_in(text))

    def _new_request(self, text: str, seen: Seen | None = None) -> str:
        """The user's own words in a user message (``user_request``) the first time this
        session reads them (every later span repeats them), else "": also for what a harness
        records in place of a request (``log_facts.PLACEHOLDER_PROMPTS``) and for a message that
        holds only what the harness injected.  Each text is read once, not once a span."""
        if not text or text in self._turn_texts or text in log_facts.PLACEHOLDER_PROMPTS:
            return ""
        self._turn_texts.add(text)
        if seen is not None and transcript.LOCATED_MARKER in text:  # a skill injected into the turn
            for injection in transcript.located(text):
                self._more().injected.setdefault(fold_skill_name(injection.skill), (injection, seen))
        request = user_request(text)
        if request == text:
            return request
        if not request or request in self._turn_texts:
            return ""
        self._turn_texts.add(request)
        return request

    def _first_sight(self, item: tuple[str, str]) -> bool:
        """True the first time this session reads ``item`` (tagged text, remembered by hash)."""
        digest = hash(item)
        if digest in self._scanned:
            return False
        self._scanned.add(digest)
        return True

    def _scan(self, raw: str, seen: Seen, plan: readings.Plan | None = None) -> None:
        """Catalogs, message-level calls and injected bodies in one piece of prompt text.

        Each of the three walks over the decoded text runs only when the raw text holds one
        of its markers (``readings.plan``); the text is decoded and walked once, whatever
        session reads it (``readings.contents``).
        """
        if plan is None:
            plan = readings.plan(raw)
        known = self._known_in(raw) if self._rules.known_skills else False
        wants_catalog = bool(plan.catalog_markers) or known or plan.shaped_catalog
        if not (wants_catalog or plan.blocks or plan.injections):
            return
        digest = hash(raw)
        if digest in self._scanned:
            return  # the same history, repeated on the next chat span
        self._scanned.add(digest)
        found = readings.contents(raw)
        if wants_catalog:
            if known:  # every string may list skills of the registry
                for text in found.strings:
                    self._catalog_in(text, plan.catalog_markers, known)
            else:  # what each string lists depends on the text alone (``Contents.catalogs``)
                for text, listed in found.catalogs(plan.catalog_markers):
                    if self._first_sight(("catalog", text)) and listed is not None:
                        self.catalog.advertise(listed[1], listed[0])
        if plan.blocks and found.blocks:
            history_calls.keep(found.blocks, seen, self._message_calls, self._message_results, found.loads())
        for injection in found.injections:
            self._more().injected.setdefault(fold_skill_name(injection.skill), (injection, seen))

    def _catalog_in(self, text: str, markers: list[str], known: bool) -> None:
        """The catalog one string of prompt text lists: by a table's shape (the fast path,
        ``catalogs``), else by its shape alone (``catalog_shapes``).  The same catalog comes
        back inside every later history: each string is parsed once."""
        marked = _has_any(text, markers)
        if not (marked or _cued(text) or known) or not self._first_sight(("catalog", text)):
            return
        if not known:
            listed = readings.listing(text, markers)
            if listed is not None:
                self.catalog.advertise(listed[1], listed[0])
            return
        if marked:
            found = catalogs.find(text)
            if found is not None:
                self.catalog.advertise(found[1], found[0])
                return
        if "\n" not in text and "\\n" in text:
            # One line with escaped line breaks (a repr of objects holding prompt text): its lines.
            text = text.replace("\\n", "\n")
        entries = catalog_shapes.find(text, self._rules.known_skills)
        if entries:
            self.catalog.advertise(entries, catalog_shapes.SHAPE)

    def _known_in(self, raw: str) -> bool:
        """Whether ``raw`` names a skill of the registry (which frames a catalog by itself)."""
        for name in self._rules.known_skills.values():  # noqa: SIM110 - no generator per text
            if name in raw:
                return True
        return False

    def absorb(self, other: SessionEvidence) -> None:
        """Take in the evidence of a provisional session that turned out to be part of this
        one.  ``other`` is dropped after: when this session has observed nothing yet (a key
        just named it, as it does for most provisional sessions), it takes over ``other``'s
        containers as they are, with the same result as adding them one by one."""
        if not (self.span_count or self._records or self._seldom):
            for name in _SLOTS:
                setattr(self, name, getattr(other, name))
            return
        self.span_count += other.span_count
        self._records += other._records
        self.framework = self.framework or other.framework
        self._framework_shape = self._framework_shape or other._framework_shape
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
        keep_first(self._message_calls, other._message_calls)
        keep_first(self._message_results, other._message_results)
        # What the other read stays read: its histories continue here without a re-read.
        self.histories.absorb(other.histories)
        keep_first(self._last_prompts, other._last_prompts)
        if other._seldom is not None:
            self._more().absorb(other._seldom)

    # -- closing --------------------------------------------------------------------------

    def finish(self, session_id: str, revision: int, close_reason: str) -> Session:
        """The session as evaluators see it, a snapshot (``closing.run``).  Leaves this object
        as it was, so a session reopened by late spans goes on accumulating and can be
        finished again, and the Session already handed out (its judge calls may still run)
        does not change: the passes read what intake gathered without changing it, and the
        Session holds new lists (and a copy of the catalog); the loads and tool calls in
        them may be intake's own, which are never changed once made."""
        seldom = self._seldom or NOTHING
        closed = closing.run(
            Gathered(
                tool_calls=self.tool_calls,
                skill_loads=self.skill_loads,
                turns=self.turns or seldom.input_turns,
                catalog=self.catalog,
                answers=self._answers,
                content_seen=self._content_seen,
                log_calls=seldom.log_calls,
                links=seldom.links,
                log_results=seldom.log_results,
                activated=seldom.activated,
                unnamed_activations=seldom.unnamed_activations,
                active_skills=seldom.active_skills,
                injected=seldom.injected,
                message_calls=self._message_calls,
                message_results=self._message_results,
                known_skills=self._rules.known_skills,
            )
        )
        expected = seldom.expected
        if self._rules.by_message:  # rules on the user's requests: read them, turn by turn
            expected = dict(expected)
            for found in self._rules.from_messages([t.user_message for t in closed.turns]):
                expected.setdefault(fold_skill_name(found.skill), found)
        first_agent = min(self.agent_spans) if self.agent_spans else None
        return Session(
            session_id=session_id,
            revision=revision,
            framework=self.framework or self._framework_shape or "unknown",
            turns=closed.turns,
            tool_calls=closed.tool_calls,
            skill_loads=closed.skill_loads,
            catalog=self.catalog.copy(),
            expected_skills=[e.skill for e in expected.values()],
            expected_because={e.skill: e.because for e in expected.values()},
            content_capture=closed.content_capture,
            first_agent_span=(first_agent[1], first_agent[2]) if first_agent else None,
            span_count=self.span_count,
            close_reason=close_reason,
            unreadable=list(seldom.unreadable),
            unreadable_count=seldom.unreadable_count,
        )


_SLOTS: tuple[str, ...] = SessionEvidence.__slots__  # what ``absorb`` takes over whole
# Where a turn's request was read (``Turn.source``): a span's recorded input, a log record
# of the prompt (``log_facts.LOG_USER_PROMPTS``), a logged GenAI message event.
_FROM_SPAN, _FROM_LOG_PROMPT, _FROM_LOG_MESSAGE = "span", "log_prompt", "log_message"
_NO_EVENTS: list[tuple[str, Any]] = []  # a span without events (never added to)
_EMPTY_OBJECT = b"{}"  # a history field holding nothing (middleware spans record their empty input)
_TOOL_DESCRIPTION = "tool_description"  # the role under which the last tool description is kept


__all__ = ["SessionEvidence", "result_text"]
