"""Per-session evidence, built incrementally as each span or log record arrives.

``observe_span`` (here) and ``observe_log`` (``log_intake``) run once per item on the hot
path: they classify it with cheap attribute checks, hand tool calls to the signal detectors
(``detectors``), and scan prompt text only when a marker says it may hold something (the
readers both share, and what they gathered, are ``intake``'s).  ``finish`` hands what they
gathered to the passes at close (``closing``), which reconcile what only makes sense
together, and returns the ``Session`` evaluators read.  Histories read before are
remembered by ``histories``.
"""

from __future__ import annotations

from collector.detect import catalogs, closing, history_calls, messages, plans, readings
from collector.detect.content import result_text, shaped_call, tool_call
from collector.detect.content import tool_description as tool_description_of
from collector.detect.expectations import EXPECTED_SKILLS_ATTRIBUTE as _EXPECTED
from collector.detect.facts import logs as log_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.gathered import Gathered, Seen
from collector.detect.intake import Intake
from collector.detect.log_intake import LogIntake
from collector.detect.seldom import NOTHING, keep_first
from collector.detect.transcript import Injection
from collector.detect.user_request import user_request
from collector.otlp.views import Encoded, EventView, SpanView
from evaluators.evidence import Session, Turn, fold_skill_name

_EVENT_ACTIVATIONS = log_facts.SPAN_EVENT_SKILL_ACTIVATED
_TOOL, _AGENT = plans.TOOL, plans.AGENT
# Any catalog's marker as it survives in raw (JSON) text.
_CATALOG_RAW: tuple[str, ...] = catalogs.RAW_MARKERS
_has_any = readings.has_any


class SessionEvidence(LogIntake):
    """A session's evidence: span intake (``observe_span``), log records (``LogIntake``),
    the shared readers and what they gathered (``Intake``), and closing (``finish``)."""

    __slots__ = ()

    # -- intake ---------------------------------------------------------------------------

    def observe_span(self, view: SpanView) -> None:
        self.span_count += 1
        span = view.span
        if not self.framework:
            self._name_framework(view, view.name)
        attrs = view.attrs
        plan = plans.plan_of(attrs)  # what the span's keys alone decide
        if plan.keyless:
            self._more().links[span.span_id] = span.parent_span_id
        if self._rules.by_attribute or plan.expected or _EXPECTED in view.resource.attrs.by_key():
            where = (f"span {view.span.name!r} ({view.span_id})", f"the resource of span {view.span_id}")
            self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs, where=where))
        if not self.model_seen:
            self.model_seen = plan.model
        events = messages.named_events(span)
        if events:
            for position, (name, event) in enumerate(events):
                if name in _EVENT_ACTIVATIONS:
                    self._observe_activation_event(view, EventView(position, event))
        kind = 0  # what the markers' values make the span (``plans.TOOL``, ``plans.AGENT``)
        for key, kinds in plan.marks:  # most spans: none, or gen_ai.operation.name's
            kind |= kinds.get(attrs.text(key) or "", 0)  # absent or empty: no mark
        if plan.tool_marked or kind & _TOOL:
            call = tool_call(view, plan.tool_markers, plan.shaped_tool, marked=True)
        elif plan.shaped_tool is not None:
            call = shaped_call(view, plan.shaped_tool)  # what ``tool_call`` reads of a span no marker marks
        else:
            call = None  # neither a marker nor a tool call's keys: no tool call
        if call is not None:
            self._observe_tool(call)
            self._tool_description(view, plan)
            return
        start = span.start_time_unix_nano
        if plan.agent_marked or kind & _AGENT:
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
            self._answers.append((span.end_time_unix_nano, answer))
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

    def _tool_description(self, view: SpanView, span_plan: plans.SpanPlan) -> None:
        """A catalog in the description of a tool span's tool (repeated on every call)."""
        text = tool_description_of(view, span_plan.shaped_tool)
        if not text or text == self._last_prompts.get(_TOOL_DESCRIPTION):
            return
        self._last_prompts[_TOOL_DESCRIPTION] = text
        plan = readings.plan(text)
        if plan.catalog_markers or plan.shaped_catalog:
            self._catalog_in(text, plan.catalog_markers, self._known_in(text))

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


_SLOTS: tuple[str, ...] = Intake.__slots__  # what ``absorb`` takes over whole
# Where a turn's request was read (``Turn.source``): a span's recorded input.
_FROM_SPAN = "span"
_EMPTY_OBJECT = b"{}"  # a history field holding nothing (middleware spans record their empty input)
_TOOL_DESCRIPTION = "tool_description"  # the role under which the last tool description is kept


__all__ = ["SessionEvidence", "result_text"]
