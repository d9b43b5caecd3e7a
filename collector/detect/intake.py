"""A session's evidence as intake gathers it, and the readers span and log intake share.

``Intake`` holds what a session has gathered so far and the readers both kinds of item go
through: tool calls to the signal detectors (``detectors``), user requests read once,
prompt text scanned when a marker says it may hold something (catalogs, message-level
calls, injected bodies).  ``SessionEvidence`` (``session``) adds span intake and closing;
``log_intake`` adds log records.
"""

from __future__ import annotations

from collections.abc import Iterable

from collector.detect import catalog_shapes, catalogs, frameworks, history_calls, names, readings, transcript
from collector.detect.content import parse_json, result_text
from collector.detect.detectors import load_of
from collector.detect.expectations import NO_RULES, Expected, Rules
from collector.detect.facts import frameworks as framework_facts
from collector.detect.facts import logs as log_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.detect.gathered import Seen
from collector.detect.histories import Histories
from collector.detect.seldom import Seldom
from collector.detect.transcript import MessageCall, MessageResult
from collector.detect.user_request import user_request
from collector.otlp.views import LogView, SpanView
from evaluators.evidence import Catalog, SkillLoad, ToolCall, Turn, UnreadableItem, fold_skill_name

_cued = catalog_shapes.cued
_has_any = readings.has_any


class Intake:
    """One session's gathered evidence; a span or log record adds to it as it arrives."""

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

    def _more(self) -> Seldom:
        """This session's ``Seldom``, made on first need."""
        seldom = self._seldom
        if seldom is None:
            seldom = self._seldom = Seldom()
        return seldom

    def note_unreadable(self, item: UnreadableItem) -> None:
        """An item of this session that could not be read: counted, the first few named."""
        self._more().note_unreadable(item)

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

    def _expect(self, found: Iterable[Expected]) -> None:
        for expected in found:
            self._more().expected.setdefault(fold_skill_name(expected.skill), expected)

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
                scanned = self._scanned  # ``_first_sight`` of each, its digest made once a text
                for _, listed, read in found.catalogs(plan.catalog_markers):
                    if read not in scanned:
                        scanned.add(read)
                        if listed is not None:
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
