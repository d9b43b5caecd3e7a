"""What an ``Assembler`` holds: its open sessions, the traces bound to them, closed sessions
kept for reopening, and its counters, with the callbacks it reports through.

``Held`` only sets this state up and answers what is open; the classes built on it
(``Kept``, ``Binding``, ``Closing``, ``Restart``, ``Admission``, ``Assembler``) each change
one part of it.  ``OpenSession`` is one open session (one revision); ``Recent`` a closed one
kept so late items can reopen it whole.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from collector.detect.expectations import NO_RULES, Rules
from collector.detect.session import SessionEvidence
from collector.sessions.config import Sessions as SessionsConfig
from collector.sessions.early_logs import EarlyLogs
from collector.sessions.keys import SessionKeys
from collector.state.types import Closed, Reopenable
from collector.telemetry import RateLimitedLog
from evaluators.evidence import Session

log = logging.getLogger("skillgauge")

CLOSE_REASONS = (
    "idle_timeout",
    "end_attribute",
    "max_duration",
    "max_spans",
    "max_bytes",
    "shutdown",
    "end_of_input",
)


class OpenSession:
    __slots__ = (
        "bytes",
        "carried",
        "ending",
        "evidence",
        "first_request",
        "ids",
        "key",
        "key_source",
        "last_request",
        "last_seen",
        "opened_at",
        "provisional",
        "requests",
        "revision",
        "skill_named",
        "spans",
        "traces",
    )

    def __init__(
        self, key: str, revision: int, now: float, provisional: bool, evidence: SessionEvidence
    ) -> None:
        self.key = key
        # What named it: "configured:<attribute>", "shape:<attribute>" (``SessionKeys``), or
        # "trace" for a trace no key named (provisional until a sibling names one).
        self.key_source = "trace"
        self.skill_named = False  # an item of it had an attribute named for a skill
        self.evidence = evidence  # what its spans and log records showed so far
        self.revision = revision
        self.first_request = 0
        self.last_request = 0
        self.opened_at = now
        self.last_seen = now
        self.bytes = 0
        self.carried = 0  # bytes of the earlier revisions' items it carries (``reopen_cache_bytes``)
        self.spans = 0  # counted over the revisions it carries, as its evidence is
        self.ending = False
        self.provisional = provisional
        # Its traces, and the id of every item taken over the revisions it carries: dicts of
        # bytes to None, as sets, which the garbage collector does not track (a set it would
        # visit at every collection while the session is open).
        self.traces: Ids = {}
        self.ids: Ids = {}
        self.requests: list[int] = []  # the spooled requests its items came in, in order


Ids = dict[bytes, None]  # a set of ids (``OpenSession.traces``, ``OpenSession.ids``)
OnClose = Callable[[Session, str], None]
OnRecord = Callable[[Closed], None]
OnKeep = Callable[[Reopenable], None]
OnForget = Callable[[str], None]
# (session key or None, trace id (``scoped``), request id) -> True when the span belongs to a
# revision that was already evaluated before a restart.
Skip = Callable[[str | None, bytes, int], bool]
# (signal, reason in ``UNREADABLE_REASONS``): an item that could not be read or detected.
OnUnreadable = Callable[[str, str], None]


@dataclass(slots=True)
class Recent:
    """A closed session kept for a while, so late spans can reopen it whole."""

    evidence: SessionEvidence
    revision: int
    first_request: int
    traces: Ids
    spans: int
    ids: Ids
    requests: list[int]
    bytes: int  # the items' bytes, every revision's: what its evidence costs, about


class Held:
    """The state an ``Assembler`` keeps, and what is open."""

    def __init__(
        self,
        config: SessionsConfig,
        on_close: OnClose,
        rules: Rules = NO_RULES,
        clock: Callable[[], float] = time.monotonic,
        on_record: OnRecord | None = None,
        on_unreadable: OnUnreadable | None = None,
        on_duplicate: Callable[[str], None] | None = None,
        on_keep: OnKeep | None = None,
        on_forget: OnForget | None = None,
        tenant_max_open: dict[str, int] | None = None,
        rebuild_kept: bool = False,
    ) -> None:
        """``on_keep``/``on_forget``: a closed session becomes reopenable whole, or stops
        being so (evicted from ``reopen_cache``, or closed for a reason that starts afresh).
        ``tenant_max_open``: tenants' own ``max_open_sessions`` (within ``max_open``).
        ``rebuild_kept``: the store keeps a kept session's requests and gives them back
        (``Spool.read_requests``), so a kept session is held as its ids only and rebuilt
        from them when a late item reopens it; else its evidence is held."""
        self._config = config
        self.rebuild_kept = rebuild_kept
        self._tenant_max_open = dict(tenant_max_open or {})
        self.open_by_tenant: dict[str, int] = {}  # sessions open, by tenant (``""`` the default)
        self._on_duplicate = on_duplicate  # (signal): a re-sent item, taken and not counted again
        self.duplicates: dict[str, int] = {}
        self._on_unreadable = on_unreadable
        self._unreadable_log = RateLimitedLog(log, logging.WARNING, 10.0)
        self._on_close = on_close
        self._on_record = on_record
        self._on_keep = on_keep
        self._on_forget = on_forget
        self._clock = clock
        self._rules = rules
        self._keys = tuple(k.split(":", 1) for k in config.keys)
        self._finder = SessionKeys(config.keys, config.keys_by_shape)
        self._body_keys = tuple(key for where, key in self._keys if where == "span")
        # Key (``session_key``) of a session a key found by shape named -> the session a
        # configured key named that took it in: later items under the shaped key go there.
        self._aliases: OrderedDict[str, str] = OrderedDict()
        # Ordered by last activity, so the idle scan stops at the first live session.
        self._open: OrderedDict[str, OpenSession] = OrderedDict()
        self._opened_order: deque[tuple[float, str, int]] = deque()
        self._trace_owner: dict[bytes, str] = {}
        # Traces bound to several open sessions (``opencode serve`` runs its sessions in one
        # trace) -> their keys, the owner among them: an unkeyed item joins the one that holds
        # its span (``Binding._holder``).
        self._hosts: dict[bytes, list[str]] = {}
        # Unkeyed log records that came before their span, held for it (``early_logs``).
        self._early = EarlyLogs()
        self._revisions: OrderedDict[str, int] = OrderedDict()  # closed sessions' last revision
        self._recent: OrderedDict[str, Recent] = OrderedDict()  # for reopening, bounded
        self.recent_bytes = 0  # what ``_recent`` holds, in its sessions' item bytes
        self.reopen_evicted = 0  # kept sessions forgotten to stay within ``reopen_cache*``
        self._recent_owner: dict[bytes, str] = {}  # trace -> the key of the ``_recent`` entry holding it
        # Reopenable revisions a restart found in the store, not yet rebuilt (``restore``):
        # they share ``reopen_cache`` with ``_recent``, and go first.
        self._dormant: OrderedDict[str, Reopenable] = OrderedDict()
        self._dormant_traces: dict[bytes, str] = {}
        # Each ``_dormant`` entry's trace ids (bytes, as ``_dormant_traces`` keys them).
        self._dormant_ids: dict[str, Iterable[bytes]] = {}
        # Kept sessions the store has reopenable rows for (``Kept._keep``).
        self._announced: set[str] = set()
        self.skip: Skip | None = None  # set only while a restart replays the spool
        self.closed_by_reason: dict[str, int] = dict.fromkeys(CLOSE_REASONS, 0)
        self.reopened = 0
        # Traces that named no session and closed holding nothing to evaluate (``nothing_to_evaluate``).
        self.discarded = 0
        # Traces that named no session and were kept, each a session of its own: they showed
        # an agent at work or skill evidence (``nothing_to_evaluate``, ``mentions_skills``).
        self.unkeyed = 0
        self.bodies_cut = 0  # skill bodies cut at ``sessions.max_skill_body_chars``

    @property
    def open_count(self) -> int:
        return len(self._open)

    def get(self, key: str) -> OpenSession | None:
        return self._open.get(key)
