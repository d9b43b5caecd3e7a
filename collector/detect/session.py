"""Per-session evidence, built incrementally as each span or log record arrives.

``SessionEvidence.observe_span`` runs once per span on the hot path: it classifies the span
with cheap attribute checks and hands tool calls to the signal detectors in ``DETECTORS``.
``finish`` orders what was seen and returns the ``Session`` evaluators read.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.detect import catalogs, file_reads, messages, patterns, skill_tools
from collector.detect.content import has_marker, tool_call
from collector.detect.expectations import NO_RULES, Rules
from collector.spans import LogView, SpanView
from evaluators.evidence import Catalog, ContentCapture, Session, SkillLoad, ToolCall, Turn, fold_skill_name

# Each signal family: tool call -> a skill load or None.  A call matches at most one.
DETECTORS: tuple[Callable[[ToolCall], SkillLoad | None], ...] = (
    skill_tools.detect,
    file_reads.detect,
)

_framework_cache: dict[str, str] = {}


def framework_of(scope: str) -> str:
    found = _framework_cache.get(scope)
    if found is None:
        found = next((fw for prefix, fw in patterns.FRAMEWORK_SCOPES if scope.startswith(prefix)), "")
        if len(_framework_cache) < 1024:
            _framework_cache[scope] = found
    return found


class SessionEvidence:
    __slots__ = (
        "_expected",
        "_rules",
        "_tool_spans_with_content",
        "agent_spans",
        "catalog",
        "framework",
        "skill_loads",
        "span_count",
        "tool_calls",
        "tool_spans",
        "turns",
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
        self.tool_spans = 0
        self._tool_spans_with_content = 0
        self._expected: dict[str, str] = {}  # folded -> as written

    def observe_span(self, view: SpanView) -> None:
        self.span_count += 1
        if not self.framework:
            self.framework = framework_of(view.scope)
        for skill in self._rules.from_attributes(view.attrs, view.resource.attrs):
            self._expected.setdefault(fold_skill_name(skill), skill)
        call = tool_call(view)
        if call is not None:
            self._observe_tool(call)
            return
        if has_marker(view, patterns.AGENT_SPAN_MARKERS):
            self.agent_spans.append((view.span.start_time_unix_nano, view.trace_id, view.span_id))
            user = messages.user_message(view)
            if user:
                self.turns.append(
                    Turn(
                        user,
                        view.span_id,
                        view.trace_id,
                        view.span.start_time_unix_nano,
                        messages.response(view),
                    )
                )
        for text in messages.catalog_candidates(view, catalogs.MARKERS):
            found = catalogs.find(text)
            if found is not None:
                shape, entries = found
                self.catalog.advertise(entries, shape)

    def observe_log(self, view: LogView) -> None:
        if not self.framework:
            self.framework = framework_of(view.scope)
        for skill in self._rules.from_attributes(view.attrs, view.resource.attrs):
            self._expected.setdefault(fold_skill_name(skill), skill)

    def _observe_tool(self, call: ToolCall) -> None:
        self.tool_spans += 1
        if call.arguments is not None or call.result is not None:
            self._tool_spans_with_content += 1
        self.tool_calls.append(call)
        for detect in DETECTORS:
            load = detect(call)
            if load is not None:
                self.skill_loads.append(load)
                break

    def absorb(self, other: SessionEvidence) -> None:
        """Take in the evidence of a provisional session that turned out to be part of this one."""
        self.span_count += other.span_count
        self.framework = self.framework or other.framework
        self.tool_calls += other.tool_calls
        self.skill_loads += other.skill_loads
        self.turns += other.turns
        self.agent_spans += other.agent_spans
        self.tool_spans += other.tool_spans
        self._tool_spans_with_content += other._tool_spans_with_content
        self.catalog.merge(other.catalog)
        for key, skill in other._expected.items():
            self._expected.setdefault(key, skill)

    def finish(self, session_id: str, revision: int, close_reason: str) -> Session:
        self.turns.sort(key=lambda t: t.start_unix_nano)
        self.tool_calls.sort(key=lambda c: c.start_unix_nano)
        self.skill_loads.sort(key=lambda s: s.time_unix_nano)
        expected = dict(self._expected)
        for skill in self._rules.from_messages([t.user_message for t in self.turns]):
            expected.setdefault(fold_skill_name(skill), skill)
        capture: ContentCapture
        if self.tool_spans == 0:
            capture = "no_tools"
        elif self._tool_spans_with_content:
            capture = "present"
        else:
            capture = "missing"
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
            content_capture=capture,
            first_agent_span=(first_agent[1], first_agent[2]) if first_agent else None,
            span_count=self.span_count,
            close_reason=close_reason,
        )
