"""The vocabulary detectors produce and evaluators read.

Everything here is plain data: no protobuf, no I/O.  Detectors in ``collector.detect`` turn
spans and log records into these objects as they arrive; evaluators only ever see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# A load's outcome.  "unresolved" is a call with no recorded outcome: different from a
# failure (which the harness reported) and never a success.
LoadStatus = Literal["loaded", "failed", "denied", "unresolved"]
LOAD_STATUSES: tuple[LoadStatus, ...] = ("loaded", "failed", "denied", "unresolved")

# Where a load was seen.  One value per signal family in collector/detect/.
Signal = Literal[
    "skill_tool",  # a skill tool: a native one (skills(), Skill(), load_skill(), ...) or one by shape
    "file_read",  # a read tool whose path ends in SKILL.md and whose result is a SKILL.md
    "shell_read",  # cat/head/tail/sed of a SKILL.md in a shell tool
    "injected",  # a SKILL.md body in a message without a tool call (pinned, framed by its name)
    "skill_attribute",  # gen_ai.skill.name / skill_name span attributes
    "log_event",  # Claude Code skill_activated / tool_result log records
    "chat_message",  # a call visible only in chat/cycle span messages (e.g. a denial)
]

# Whether a catalog of skills was shown to the model, and what it held.
CatalogState = Literal["advertised", "empty", "not_recorded"]

# Whether tool spans carried their arguments and results: a file-read load is invisible
# when they do not, and the coverage must say so rather than report "no skill used".
ContentCapture = Literal["present", "missing", "no_tools"]


def fold_skill_name(name: str) -> str:
    """Skill names compare case-insensitively with ``_`` equal to ``-`` (as Strands Evals)."""
    return name.strip().lower().replace("_", "-")


@dataclass(slots=True)
class SkillLoad:
    """One attempt to load a skill, anchored to the span that made it."""

    skill: str
    status: LoadStatus
    signal: Signal
    span_id: str  # hex; the span to parent evaluation results to
    trace_id: str
    time_unix_nano: int = 0
    body: str | None = None  # the SKILL.md body as the trace recorded it
    path: str | None = None
    message: str | None = None  # the harness's words on failure / denial
    tool_call_id: str | None = None
    body_cut: int = 0  # characters of the body cut off at the size cap (shown in coverage)

    @property
    def has_body(self) -> bool:
        return bool(self.body)

    @property
    def key(self) -> str:
        return fold_skill_name(self.skill)


@dataclass(slots=True)
class CatalogEntry:
    name: str
    description: str = ""
    location: str | None = None


MAX_CATALOG_ENTRIES = 500  # per session, unless the collector's config says otherwise
MAX_SKILL_NAME_CHARS = 256  # the spec allows 64; a longer name is not kept at all
# The spec's maximum is 1,024, but harnesses show longer ones (a recorded Claude Code
# catalog: over 1,024); past this a description is cut.
MAX_DESCRIPTION_CHARS = 4096


@dataclass(slots=True)
class Catalog:
    """The skills advertised to the model, merged over every place a session showed them.

    Bounded: at most ``limit`` entries, names of at most ``MAX_SKILL_NAME_CHARS`` and
    descriptions cut at ``MAX_DESCRIPTION_CHARS``; ``truncated`` counts the entries not kept
    whole, so a catalog that was cut says so."""

    state: CatalogState = "not_recorded"
    skills: dict[str, CatalogEntry] = field(default_factory=dict)  # folded name -> entry
    source: str | None = None  # which shape it was read from, e.g. "available_skills_xml"
    limit: int = MAX_CATALOG_ENTRIES
    truncated: int = 0

    def advertise(self, entries: list[CatalogEntry], source: str) -> None:
        """Take ``entries`` in: a skill known already keeps its entry, unless it was shown by
        name alone and this entry describes it."""
        for entry in entries:
            key = fold_skill_name(entry.name)
            known = self.skills.get(key)
            if known is not None:
                if entry.description and not known.description:
                    self.skills[key] = self._described(entry)
                continue
            if len(self.skills) >= self.limit or len(entry.name) > MAX_SKILL_NAME_CHARS:
                self.truncated += 1
                continue
            self.skills[key] = self._described(entry)
        if entries:
            self.state = "advertised"
        elif self.state == "not_recorded":
            self.state = "empty"
        self.source = self.source or source

    def _described(self, entry: CatalogEntry) -> CatalogEntry:
        """``entry`` with its description cut at ``MAX_DESCRIPTION_CHARS`` (a new entry:
        parsed ones are shared)."""
        if len(entry.description) <= MAX_DESCRIPTION_CHARS:
            return entry
        self.truncated += 1
        return CatalogEntry(entry.name, entry.description[:MAX_DESCRIPTION_CHARS], entry.location)

    def copy(self) -> Catalog:
        """A catalog that later ``advertise`` and ``merge`` calls on this one leave as it is
        (the entries are shared: nothing changes one once it is kept)."""
        return Catalog(self.state, dict(self.skills), self.source, self.limit, self.truncated)

    def merge(self, other: Catalog) -> None:
        if other.state == "not_recorded":
            return
        self.advertise(list(other.skills.values()), other.source or "")
        self.truncated += other.truncated
        if other.state == "empty" and self.state == "not_recorded":
            self.state = "empty"


@dataclass(frozen=True, slots=True)
class UnreadableItem:
    """A span or log record of the session that could not be read or detected (its neighbours
    were; it adds nothing to the evidence)."""

    kind: Literal["span", "log"]
    trace_id: str  # hex, "" when the item had none
    span_id: str
    reason: str  # a bounded word: too_deep, bad_value, internal_error
    detail: str  # the error, cut to a few hundred characters


@dataclass(slots=True)
class ToolCall:
    """One tool execution as the trace recorded it."""

    name: str
    span_id: str
    trace_id: str
    start_unix_nano: int
    call_id: str | None = None
    arguments: str | None = None  # as recorded (usually JSON text)
    result: str | None = None
    error: str | None = None  # None when the tool reported success
    skill_attribute: str | None = None  # a skill named by span attributes (gen_ai.skill.name)
    skill_resolved: bool = False  # the harness said where the skill came from: it exists
    # The harness marked the call as having run without error, where its span's status says
    # so (a result not recorded is then no unknown outcome); False when nothing says.
    succeeded: bool = False
    end_unix_nano: int = 0  # when the tool span ended (0: not a span, or not recorded)


@dataclass(slots=True)
class Turn:
    """One user request and what the agent answered to it."""

    user_message: str
    span_id: str
    trace_id: str
    start_unix_nano: int
    response: str | None = None
    # Where the request was read: "span" (a span's recorded input), "log_prompt" (a log record
    # of the prompt), "log_message" (a logged message event); "" when not said.
    source: str = ""


@dataclass(frozen=True, slots=True)
class Because:
    """Why a skill was expected of a session, recorded as detection found it.

    ``rule``: ``user_message`` (a config rule's regex, ``pattern``, matched ``matched`` in the
    request of ``where``, e.g. "turn 2"), ``attribute`` (a config rule's ``key=value``,
    ``pattern``, found on ``where``) or ``expected_skills`` (the app declared it in
    ``skillgauge.expected_skills``, whose value is ``matched``, on ``where``)."""

    rule: Literal["user_message", "attribute", "expected_skills"]
    pattern: str
    matched: str
    where: str


# Between a tenant and a session id in a session's key (``session_key``).
TENANT_SEPARATOR = "\x1f"


def session_key(tenant: str, session_id: str) -> str:
    """The key a session is kept under: its id within its tenant.  The default tenant's
    keys are the ids themselves; any other's are ``tenant \x1f id``.  An id of the default
    tenant that holds the separator is prefixed with it, so no key can be taken for
    another tenant's."""
    if not tenant and TENANT_SEPARATOR not in session_id:
        return session_id
    return f"{tenant}{TENANT_SEPARATOR}{session_id}"


def split_session_key(key: str) -> tuple[str, str]:
    """(tenant, session id) of a ``session_key``."""
    tenant, separator, session_id = key.partition(TENANT_SEPARATOR)
    return (tenant, session_id) if separator else ("", key)


@dataclass(slots=True)
class Session:
    """Everything known about one session when it closed.  ``tenant``: whose session it is
    ("" the default); ``key`` is what it is kept under."""

    session_id: str
    revision: int = 1
    framework: str = "unknown"
    turns: list[Turn] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    skill_loads: list[SkillLoad] = field(default_factory=list)
    catalog: Catalog = field(default_factory=Catalog)
    expected_skills: list[str] = field(default_factory=list)
    expected_because: dict[str, Because] = field(default_factory=dict)  # skill -> why, as found
    content_capture: ContentCapture = "no_tools"
    first_agent_span: tuple[str, str] | None = None  # (trace_id, span_id) hex
    span_count: int = 0
    close_reason: str = ""
    # Items that could not be read: the first few named, all counted.
    unreadable: list[UnreadableItem] = field(default_factory=list)
    unreadable_count: int = 0
    tenant: str = ""
    # What named the session: "configured:<attribute>", "shape:<attribute>" (an attribute
    # shaped like a session key), "trace" (no key: the trace is a session of its own); "" unsaid.
    key_source: str = ""

    @property
    def key(self) -> str:
        return session_key(self.tenant, self.session_id)

    def loads_of(self, skill: str) -> list[SkillLoad]:
        key = fold_skill_name(skill)
        return [load for load in self.skill_loads if load.key == key]
