"""Group spans and log records into sessions, and decide when a session is closed.

Session key: the first present of a configured list (span or resource attributes; for a log
record with none, the same keys among the fields its body holds).  A span without a key
belongs to whatever session its trace is bound to; a trace seen with no key at all becomes a
provisional session of its own, which is folded into the keyed session as soon as a sibling
span names one (a harness may put the id on agent spans but not on tool spans, and children
are exported before their parents).

Tenants: each request comes from one tenant (its bearer token's), and sessions are kept
apart per tenant: a session's key is ``session_key(tenant, id)`` and a trace is bound to a
session only within its tenant, so the same ``session.id`` or trace id from two tenants
makes two sessions.

Closing: idle timeout, an explicit end attribute, max duration, max spans or bytes, and
shutdown.  The assembler never waits: closed sessions go to ``on_close`` at once.

Revisions: spans for a recently closed session reopen it as the next revision, which
carries the earlier spans' evidence too, so its results can supersede the earlier ones.
Durability: every span arrives with the id of the spooled request that carried it; a closed
revision is reported (``on_record``) with its request range and traces, which is what a
restart needs to rebuild open sessions and skip the spans of revisions already evaluated.

Idempotence: a span is identified by (trace id, span id) within its session, a log record by
``log_id``.  An item its session has taken already (an exporter sending a request again after
a timeout, or requests that overlap) is acknowledged and counted as a duplicate, and is not
counted, detected or judged again.  The ids are kept per open session (as many as it has
items) and go with it when it closes for a reason that lets it reopen whole, so a re-sent
item neither reopens a closed session nor counts in its next revision.  A restart replays
the spooled requests through the same rule, so it rebuilds the same sets.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.component import Retryable
from collector.detect.expectations import NO_RULES, Rules
from collector.detect.session import SessionEvidence
from collector.otlp.received import Accepted
from collector.otlp.views import Attributes, LogView, ResourceView, SpanView
from collector.sessions.config import Sessions as SessionsConfig
from collector.sessions.keys import SessionKeys, mentions_skills
from collector.state.store import Closed, Reopenable
from collector.telemetry import RateLimitedLog
from evaluators.evidence import TENANT_SEPARATOR, Session, UnreadableItem, session_key, split_session_key

CLOSE_REASONS = (
    "idle_timeout",
    "end_attribute",
    "max_duration",
    "max_spans",
    "max_bytes",
    "shutdown",
    "end_of_input",
)
# Closed for these reasons, a session reopened by late spans carries its earlier evidence.
# Cut for size or age (max_spans, max_bytes, max_duration), the next revision starts afresh.
_REOPEN_WHOLE = frozenset({"idle_timeout", "end_attribute"})
_ZERO_TRACE = bytes(16)
# How long ``feed`` works before it pauses: what an acknowledgement may wait behind it.  Spans
# cost from ~10 us to milliseconds each (a long history read whole), so the slice is a time,
# not a count.
SLICE_SECONDS = 0.002
# Why a log record with neither a session key nor a trace id is not taken.
UNCORRELATED = "log record with no session key and no trace_id to correlate it"
_ZERO_SPAN = bytes(8)
_CONFIGURED = "configured:"
_MAX_ALIASES = 100_000  # shaped keys remembered as leading to a configured key's session


def _shaped(source: str) -> bool:
    return source.startswith("shape:")


UNREADABLE_REASONS = ("too_deep", "bad_value", "internal_error")
_UNREADABLE_DETAIL_CHARS = 300
log = logging.getLogger("skillgauge")


class TenantLimited(Retryable):
    """Backpressure for one tenant: it reached a limit of its own."""


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
        self.traces: set[bytes] = set()
        self.ids: set[bytes] = set()  # ``item_id`` of every item taken, over the revisions it carries
        self.requests: list[int] = []  # the spooled requests its items came in, in order


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
class _Recent:
    """A closed session kept for a while, so late spans can reopen it whole."""

    evidence: SessionEvidence
    revision: int
    first_request: int
    traces: set[bytes]
    spans: int
    ids: set[bytes]
    requests: list[int]
    bytes: int  # the items' bytes, every revision's: what its evidence costs, about


def scoped(tenant: str, trace_id: bytes) -> bytes:
    """A trace id within its tenant: how traces are bound to sessions (and recorded in
    ``Closed.traces``).  The default tenant's are the ids themselves."""
    return tenant.encode() + TENANT_SEPARATOR.encode() + trace_id if tenant and trace_id else trace_id


def nothing_to_evaluate(session: Session) -> bool:
    """True for a session that shows no agent at work: no agent span, turn, tool call, skill
    load, catalog, expected skill or unreadable item.  A trace that named no session, closed
    so and held no span in a GenAI convention either (a harness's own housekeeping: an auth
    check, a config read, in traces apart from its runs) is not a session and is not
    evaluated; it is counted."""
    return not (
        session.first_agent_span
        or session.turns
        or session.tool_calls
        or session.skill_loads
        or session.expected_skills
        or session.unreadable_count
        or session.catalog.state != "not_recorded"
    )


def span_problem(span: Span) -> str | None:
    """Why a span cannot be used at all, or None."""
    return ids_problem(span.trace_id, span.span_id)


def ids_problem(trace_id: bytes, span_id: bytes) -> str | None:
    """Why a span with these ids cannot be used at all, or None."""
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        return "span with an invalid trace_id (need 16 non-zero bytes)"
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        return "span with an invalid span_id (need 8 non-zero bytes)"
    return None


def log_id(record: LogRecord) -> bytes:
    """What identifies a log record within its session.  OTLP gives log records no id, so a
    record is its content: a digest of the record as sent (trace and span id, time, observed
    time, severity, event name, body, attributes; deterministic protobuf encoding).  Two
    records alike in all of these are one record sent twice; a record whose content changed
    on the way (a redaction rule added between the two sends) is a new one."""
    return _log_digest(record.SerializeToString(deterministic=True))


def _log_digest(encoded: bytes) -> bytes:
    """``log_id`` of a record from its deterministic encoding."""
    return b"L" + hashlib.blake2b(encoded, digest_size=16).digest()


Steps = Generator[None, None, Accepted]  # pauses (yields) now and then; returns the answer


def finish(steps: Steps) -> Accepted:
    """What ``steps`` return, run without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def check_spans(request: ExportTraceServiceRequest) -> Accepted:
    """What ``add_spans`` will accept and reject, found without assembling anything."""
    return finish(checking_spans(request))


def checking_spans(request: ExportTraceServiceRequest, slice_seconds: float = SLICE_SECONDS) -> Steps:
    """``check_spans``, pausing once ``slice_seconds`` have passed since it started or last
    paused, so that a caller on the event loop lets other work (health checks) through."""
    result = Accepted()
    clock = time.perf_counter
    pause_at = clock() + slice_seconds
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if clock() >= pause_at:
                    yield
                    pause_at = clock() + slice_seconds
                problem = span_problem(span)
                if problem is None:
                    result.accepted += 1
                else:
                    result.reject(problem)
    return result


class Assembler:
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
    ) -> None:
        """``on_keep``/``on_forget``: a closed session becomes reopenable whole, or stops
        being so (evicted from ``reopen_cache``, or closed for a reason that starts afresh).
        ``tenant_max_open``: tenants' own ``max_open_sessions`` (within ``max_open``)."""
        self._config = config
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
        self._revisions: OrderedDict[str, int] = OrderedDict()  # closed sessions' last revision
        self._recent: OrderedDict[str, _Recent] = OrderedDict()  # for reopening, bounded
        self.recent_bytes = 0  # what ``_recent`` holds, in its sessions' item bytes
        self._recent_owner: dict[bytes, str] = {}  # trace -> the key of the ``_recent`` entry holding it
        # Reopenable revisions a restart found in the store, not yet rebuilt (``restore``):
        # they share ``reopen_cache`` with ``_recent``, and go first.
        self._dormant: OrderedDict[str, Reopenable] = OrderedDict()
        self._dormant_traces: dict[bytes, str] = {}
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

    # -- intake ---------------------------------------------------------------------------

    def add_spans(
        self,
        request: ExportTraceServiceRequest,
        request_id: int = 0,
        *,
        admit: bool = True,
        raw: bytes | None = None,
        tenant: str = "",
    ) -> Accepted:
        if admit:
            self.admit()
        result = Accepted()
        for _ in self.feed(request, request_id, result, raw=raw, tenant=tenant):
            pass
        return result

    def feed(
        self,
        request: ExportTraceServiceRequest,
        request_id: int,
        result: Accepted,
        slice_seconds: float = SLICE_SECONDS,
        raw: bytes | None = None,
        tenant: str = "",
    ) -> Iterator[None]:
        """Place each span of a request (from ``tenant``) in its session and hand it to that
        session's evidence, pausing (yielding) once ``slice_seconds`` have passed since it
        started or last paused, so that a caller on the event loop can let other work
        (acknowledgements) through in between.

        ``raw``: the request as received, when known.  Each span then counts an equal share
        of its size towards ``max_bytes`` instead of being measured (measuring a span means
        walking all of it again)."""
        now = self._clock()
        touched: dict[str, OpenSession] = {}
        share: int | None = None
        if raw is not None:
            spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            share = len(raw) // max(1, spans)
        clock = time.perf_counter
        pause_at = clock() + slice_seconds
        for resource_spans in request.resource_spans:
            resource = ResourceView(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                scope = scope_spans.scope.name
                for span in scope_spans.spans:
                    if clock() >= pause_at:
                        yield
                        pause_at = clock() + slice_seconds
                    problem = span_problem(span)
                    if problem is not None:
                        result.reject(problem)
                        continue
                    session: OpenSession | None = None
                    before = result.accepted
                    try:
                        view = SpanView(span, scope, resource)
                        size = span.ByteSize() if share is None else share
                        session = self._place(
                            view.attrs,
                            resource.attrs,
                            span.trace_id,
                            span.span_id,
                            size,
                            request_id,
                            result,
                            now,
                            tenant,
                        )
                        if session is None:
                            continue
                        session.evidence.observe_span(view)
                    except Exception as err:  # this span alone: its neighbours go on as if it were not sent
                        result.accepted = before + 1  # acknowledged: taken, though unreadable
                        self._unreadable("span", span.trace_id, span.span_id, session, err)
                        if session is None:
                            continue
                    touched[session.key] = session
                    if self._over_limits(session):
                        touched.pop(session.key, None)
        for session in touched.values():
            if session.ending:
                self._close(session, "end_attribute")

    def _place(
        self,
        values: Attributes,
        resource_values: Attributes,
        trace_id: bytes,
        span_id: bytes,
        size: int,
        request_id: int,
        result: Accepted,
        now: float,
        tenant: str,
    ) -> OpenSession | None:
        """The open session a usable span joins, counted in it; None for a span that an
        evaluation before a restart already accounted for, or that its session has taken
        already (a re-sent span)."""
        trace = scoped(tenant, trace_id)
        key, source = self._key_and_source(values, resource_values, tenant, trace)
        if self.skip is not None and self.skip(key, trace, request_id):
            result.accepted += 1  # evaluated before the restart: accounted for
            return None
        ident = trace_id + span_id
        if self._taken(key, trace, ident, tenant):
            result.accepted += 1
            self._duplicate("traces")
            return None
        session = self._session_for(key, trace, now, request_id, tenant, source)
        if session.provisional and not session.skill_named:
            session.skill_named = mentions_skills(values)
        session.ids.add(ident)
        session.spans += 1
        session.bytes += size
        session.last_seen = now
        end = self._config.end_attribute
        if end in values and values.get(end) in (True, "true", "True", 1):
            session.ending = True
        result.accepted += 1
        return session

    def add_logs(
        self,
        request: ExportLogsServiceRequest,
        request_id: int = 0,
        *,
        admit: bool = True,
        raw: bytes | None = None,
        tenant: str = "",
    ) -> Accepted:
        if admit:
            self.admit()
        now = self._clock()
        result = Accepted()
        for resource_logs in request.resource_logs:
            resource = ResourceView(resource_logs.resource)
            for scope_logs in resource_logs.scope_logs:
                scope = scope_logs.scope.name
                for record in scope_logs.log_records:
                    session: OpenSession | None = None
                    try:
                        view = LogView(record, scope, resource)
                        trace_id = scoped(
                            tenant,
                            record.trace_id
                            if len(record.trace_id) == 16 and record.trace_id != _ZERO_TRACE
                            else b"",
                        )
                        key, source = self._log_key_and_source(view, tenant, trace_id)
                        if key is None and not trace_id:
                            # Not an invalid record: one no session can use.  Counted apart, and
                            # named by its event, so a sender sees which of its events these are.
                            result.uncorrelated += 1
                            result.reject(f"{UNCORRELATED} ({view.event_name or 'no event name'})")
                            continue
                        if self.skip is not None and self.skip(key, trace_id, request_id):
                            result.accepted += 1
                            continue
                        encoded = record.SerializeToString(deterministic=True)  # its id and its size
                        ident = _log_digest(encoded)
                        if self._taken(key, trace_id, ident, tenant):
                            result.accepted += 1
                            self._duplicate("logs")
                            continue
                        session = self._session_for(key, trace_id, now, request_id, tenant, source)
                        if session.provisional and not session.skill_named:
                            session.skill_named = mentions_skills(view.attrs)
                        session.ids.add(ident)
                        session.bytes += len(encoded)
                        session.last_seen = now
                        session.evidence.observe_log(view)
                    except Exception as err:  # this record alone, as for spans
                        self._unreadable("log", record.trace_id, record.span_id, session, err)
                    result.accepted += 1
                    if session is not None:
                        self._over_limits(session)
        return result

    def _taken(self, key: str | None, trace_id: bytes, ident: bytes, tenant: str) -> bool:
        """True when the session this item would join (open, or closed lately and kept for
        reopening) has taken an item with this ``ident`` already: a re-sent item.
        ``trace_id``: ``scoped`` to ``tenant``."""
        if key is None:
            owner = self._trace_owner.get(trace_id) or self._recent_owner.get(trace_id) if trace_id else None
            key = owner if owner is not None else session_key(tenant, trace_id[-16:].hex())
        session = self._open.get(key)
        if session is not None:
            return ident in session.ids
        recent = self._recent.get(key)
        return recent is not None and ident in recent.ids

    def _duplicate(self, signal: str) -> None:
        self.duplicates[signal] = self.duplicates.get(signal, 0) + 1
        if self._on_duplicate is not None:
            self._on_duplicate(signal)

    def _unreadable(
        self, kind: str, trace_id: bytes, span_id: bytes, session: OpenSession | None, err: Exception
    ) -> None:
        """Count and name an item that could not be read or detected (in its session's
        coverage when its session is known, and in a rate-limited log line)."""
        if isinstance(err, RecursionError):
            reason = "too_deep"
        elif isinstance(err, (ValueError, TypeError, KeyError, IndexError)):
            reason = "bad_value"
        else:
            reason = "internal_error"
        if self._on_unreadable is not None:
            self._on_unreadable("traces" if kind == "span" else "logs", reason)
        detail = f"{type(err).__name__}: {err}"[:_UNREADABLE_DETAIL_CHARS]
        if session is not None:
            session.evidence.note_unreadable(
                UnreadableItem(
                    "span" if kind == "span" else "log", trace_id.hex(), span_id.hex(), reason, detail
                )
            )
        self._unreadable_log(
            "unreadable %s (trace %s, span %s) in session %s: %s (%s); the rest of its request is evaluated",
            kind,
            trace_id.hex() or "-",
            span_id.hex() or "-",
            session.key if session is not None else "(unknown)",
            reason,
            detail,
        )

    def cap_new_sessions(
        self, request: ExportTraceServiceRequest, promised: int = 0, tenant: str = ""
    ) -> Accepted:
        """``check_spans``, with the spans that would open a session past ``max_open`` (given
        ``promised`` sessions that requests admitted but not yet assembled may open) removed
        from ``request`` (from ``tenant``) and counted as rejected; ``opens`` is how many
        sessions the rest may open.  Only a request with more spans than there are free
        sessions is looked into.

        Raises ``Retryable`` (nothing taken) instead when the request's new sessions would
        all fit once open ones close: a sender retries backpressure, while a partial success
        is final (OTLP senders, the Collector among them, must not retry it), so only what no
        retry could ever take, a request opening more sessions by itself than its limit, is
        rejected in part."""
        return finish(self.capping_new_sessions(request, promised, tenant))

    def capping_new_sessions(
        self,
        request: ExportTraceServiceRequest,
        promised: int = 0,
        tenant: str = "",
        checked: Accepted | None = None,
    ) -> Steps:
        """``cap_new_sessions``, pausing (yielding) as ``checking_spans`` does; ``checked``:
        what ``check_spans`` found already, when known (then it does not pause unless the
        request may open more sessions than there is room for)."""
        result = checked if checked is not None else (yield from checking_spans(request))
        headroom = self._config.max_open - len(self._open) - promised
        limit = f"sessions.max_open ({self._config.max_open} sessions open or admitted)"
        ceiling = self._config.max_open  # the most sessions this tenant could ever hold open
        if tenant in self._tenant_max_open:
            ceiling = min(ceiling, self._tenant_max_open[tenant])
            own = self._tenant_max_open[tenant] - self.open_by_tenant.get(tenant, 0)
            if own < headroom:
                headroom = max(0, own)
                limit = f"tenant {tenant}'s max_open_sessions ({self._tenant_max_open[tenant]} open)"
        if result.accepted <= headroom:
            result.opens = result.accepted
            return result
        usable: list[tuple[tuple[int, int, int], bytes, str | None]] = []  # (where, trace, key)
        keyed: dict[bytes, str] = {}  # trace -> the key a sibling span in this request names
        clock = time.perf_counter
        pause_at = clock() + SLICE_SECONDS
        for r, resource_spans in enumerate(request.resource_spans):
            resource = ResourceView(resource_spans.resource)
            for s, scope_spans in enumerate(resource_spans.scope_spans):
                for i, span in enumerate(scope_spans.spans):
                    if clock() >= pause_at:
                        yield
                        pause_at = clock() + SLICE_SECONDS
                    if span_problem(span) is None:
                        key = self._key_of(SpanView(span, "", resource).attrs, resource.attrs, tenant)
                        trace = scoped(tenant, span.trace_id)
                        usable.append(((r, s, i), trace, key))
                        if key is not None:
                            keyed.setdefault(trace, key)
        new: set[str] = set()
        over: set[str] = set()  # the sessions past the headroom
        dropped: dict[tuple[int, int], set[int]] = {}  # (resource, scope) -> span indexes
        for n, ((r, s, i), trace_id, key) in enumerate(usable):
            if n % 4096 == 4095 and clock() >= pause_at:
                yield
                pause_at = clock() + SLICE_SECONDS
            if key is None:
                owner = self._trace_owner.get(trace_id)
                provisional = session_key(tenant, trace_id[-16:].hex())
                key = owner if owner is not None and owner in self._open else keyed.get(trace_id, provisional)
            if key in self._open or key in new:
                continue
            if len(new) < headroom:
                new.add(key)
            else:
                over.add(key)
                dropped.setdefault((r, s), set()).add(i)
        if over and len(new) + len(over) <= ceiling:
            raise Retryable(
                f"{len(self._open)} sessions open and {promised} admitted leave no room for the "
                f"{len(new) + len(over)} this request opens ({limit}); retry later",
                retry_after=5.0,
            )
        count = sum(len(d) for d in dropped.values())
        if count:
            for (r, s), indexes in dropped.items():
                spans = request.resource_spans[r].scope_spans[s].spans
                kept = [span for i, span in enumerate(spans) if i not in indexes]
                del spans[:]
                spans.extend(kept)
            why = f"span would open a session past {limit}; retry it later"
            for _ in range(count):
                result.reject(why)
            result.accepted -= count
            result.over_max_open = count
        result.opens = len(new)
        return result

    def admit(self) -> None:
        if len(self._open) >= self._config.max_open:
            raise Retryable(
                f"{len(self._open)} sessions open (sessions.max_open); retry later", retry_after=5.0
            )

    def admit_tenant(self, tenant: str) -> None:
        """Raise ``TenantLimited`` while ``tenant`` has its own ``max_open_sessions`` open."""
        limit = self._tenant_max_open.get(tenant)
        if limit is not None and self.open_by_tenant.get(tenant, 0) >= limit:
            raise TenantLimited(
                f"tenant {tenant} has {limit} sessions open, its max_open_sessions; retry later",
                retry_after=5.0,
            )

    def _key_of(self, values: Attributes, resource: Attributes, tenant: str) -> str | None:
        """The session key an item names (``_key_and_source``), or None."""
        return self._key_and_source(values, resource, tenant)[0]

    def _key_and_source(
        self, values: Attributes, resource: Attributes, tenant: str, trace: bytes = b""
    ) -> tuple[str | None, str]:
        """The session key: the first configured key present, on the item or its resource,
        else one found by its shape (``SessionKeys``), within ``tenant`` (``session_key``);
        and what named it (``OpenSession.key_source``; "trace" for none).  ``trace``
        (``scoped``): the item's trace, when it is being placed; bound to a session a key
        named, the item joins it whatever a shaped key says (``_session_for``), so none is
        looked for (a lookup costs a hash of the item's key names: hundreds on a span that
        flattens its messages)."""
        found = self._finder.configured(values, resource)
        if found is None and not self._keyed(trace):
            found = self._finder.shaped(values, resource)
        if found is None:
            return None, "trace"
        key = session_key(tenant, found.value)
        if found.source == "shape":
            key = self._aliases.get(key, key)
        return key, f"{found.source}:{found.attribute}"

    def _keyed(self, trace: bytes) -> bool:
        """Whether ``trace`` is bound to an open session a key named (not a provisional one)."""
        owner = self._trace_owner.get(trace) if trace else None
        session = self._open.get(owner) if owner is not None else None
        return session is not None and not session.provisional

    def _log_key_of(self, view: LogView, tenant: str) -> str | None:
        return self._log_key_and_source(view, tenant)[0]

    def _log_key_and_source(self, view: LogView, tenant: str, trace: bytes = b"") -> tuple[str | None, str]:
        """A log record's session key: as a span's, else under the configured span keys among
        the fields its body holds (``LogView.message_fields``: a harness that names the
        session only in its log lines' fields)."""
        key, source = self._key_and_source(view.attrs, view.resource.attrs, tenant, trace)
        if key is not None or not self._body_keys:
            return key, source
        found = view.message_fields
        if found is None:
            return None, source
        for name in self._body_keys:
            value = found[1].get(name)
            if type(value) is str and value:
                return session_key(tenant, value), f"configured:{name}"
        return None, source

    def _session_for(
        self,
        key: str | None,
        trace_id: bytes,
        now: float,
        request_id: int,
        tenant: str,
        source: str = "trace",
    ) -> OpenSession:
        """``trace_id``: ``scoped`` to ``tenant``; ``source``: what named ``key``.  A key found
        by shape yields to a configured one: a trace bound to a session a configured key named
        stays there, and a session a shaped key named is folded into the configured one that
        names one of its traces (its key then leads there)."""
        owner = self._trace_owner.get(trace_id) if trace_id else None
        if key is None:
            if owner is not None and owner in self._open:
                return self._touch(self._open[owner], request_id)
            # The trace is its own session until a sibling names one.
            key = session_key(tenant, trace_id[-16:].hex())
            session = self._open.get(key) or self._start(key, now, provisional=True)
        else:
            bound = self._open.get(owner) if owner is not None and owner != key else None
            if bound is not None and _shaped(source) and bound.key_source.startswith(_CONFIGURED):
                return self._touch(bound, request_id)
            session = self._open.get(key) or self._start(key, now, provisional=False, source=source)
            if _shaped(session.key_source) and not _shaped(source):
                session.key_source = source  # a configured key names it too
            if bound is not None and (
                bound.provisional or (_shaped(bound.key_source) and not _shaped(session.key_source))
            ):
                if not bound.provisional:
                    self._aliases[bound.key] = session.key
                    if len(self._aliases) > _MAX_ALIASES:
                        self._aliases.popitem(last=False)
                self._fold(bound, into=session)
        if trace_id and trace_id not in session.traces:
            session.traces.add(trace_id)
            self._trace_owner[trace_id] = session.key
        return self._touch(session, request_id)

    def _touch(self, session: OpenSession, request_id: int) -> OpenSession:
        self._open.move_to_end(session.key)
        if request_id:  # the spooled requests this session needs after a restart
            session.first_request = session.first_request or request_id
            session.last_request = max(session.last_request, request_id)
            if not session.requests or session.requests[-1] != request_id:
                session.requests.append(request_id)
        return session

    def _start(self, key: str, now: float, provisional: bool, source: str = "trace") -> OpenSession:
        recent = self._forget_recent(key)
        revision = max(self._revisions.pop(key, 0), recent.revision if recent else 0) + 1
        if revision > 1:
            self.reopened += 1
        if recent is not None:
            evidence = recent.evidence
        else:
            evidence = SessionEvidence(self._rules)
            evidence.catalog.limit = self._config.max_catalog_entries
        session = OpenSession(key, revision, now, provisional, evidence)
        session.key_source = source
        if recent is not None:  # late spans: the new revision carries the earlier ones too
            session.carried = recent.bytes
            session.first_request = recent.first_request
            session.traces = recent.traces
            session.spans = recent.spans
            session.ids = recent.ids
            session.requests = recent.requests
            for trace_id in recent.traces:
                self._trace_owner.setdefault(trace_id, key)
        self._open[key] = session
        self._count_open(key, 1)
        self._opened_order.append((now, key, revision))
        return session

    def _count_open(self, key: str, change: int) -> None:
        tenant = split_session_key(key)[0]
        self.open_by_tenant[tenant] = self.open_by_tenant.get(tenant, 0) + change

    def _fold(self, provisional: OpenSession, into: OpenSession) -> None:
        del self._open[provisional.key]
        self._count_open(provisional.key, -1)
        into.evidence.absorb(provisional.evidence)
        into.bytes += provisional.bytes
        into.spans += provisional.spans
        into.opened_at = min(into.opened_at, provisional.opened_at)
        firsts = [r for r in (into.first_request, provisional.first_request) if r]
        into.first_request = min(firsts) if firsts else 0
        into.last_request = max(into.last_request, provisional.last_request)
        into.ids |= provisional.ids
        into.skill_named = into.skill_named or provisional.skill_named
        into.requests = sorted({*into.requests, *provisional.requests})
        for trace_id in provisional.traces:
            into.traces.add(trace_id)
            self._trace_owner[trace_id] = into.key

    def _over_limits(self, session: OpenSession) -> bool:
        if session.spans >= self._config.max_spans:
            self._close(session, "max_spans")
            return True
        if session.bytes >= self._config.max_bytes:
            self._close(session, "max_bytes")
            return True
        return False

    # -- closing --------------------------------------------------------------------------

    def close_due(self, limit: int | None = None) -> int:
        """Close sessions that were idle too long or open too long, at most ``limit`` of
        them (the rest wait for the next call).  Returns how many."""
        now = self._clock()
        closed = 0
        idle_before = now - self._config.idle_timeout
        while self._open and (limit is None or closed < limit):
            session = next(iter(self._open.values()))
            if session.last_seen > idle_before:
                break
            self._close(session, "idle_timeout")
            closed += 1
        born_before = now - self._config.max_duration
        while (
            self._opened_order
            and self._opened_order[0][0] <= born_before
            and (limit is None or closed < limit)
        ):
            _, key, revision = self._opened_order.popleft()
            expired = self._open.get(key)
            if expired is not None and expired.revision == revision:
                self._close(expired, "max_duration")
                closed += 1
        return closed

    def close(self, key: str, reason: str) -> bool:
        """Close one open session now (a restart finishing a revision that closed before it)."""
        session = self._open.get(key)
        if session is not None:
            self._close(session, reason)
        return session is not None

    def seed_revision(self, key: str, revision: int) -> None:
        """The next session under ``key`` gets ``revision + 1`` (restored after a restart)."""
        self._revisions[key] = max(self._revisions.get(key, 0), revision)

    def close_all(self, reason: str = "shutdown") -> int:
        sessions = list(self._open.values())
        for session in sessions:
            self._close(session, reason)
        return len(sessions)

    def _close(self, session: OpenSession, reason: str) -> None:
        if self._open.pop(session.key, None) is None:
            return
        self._count_open(session.key, -1)
        for trace_id in session.traces:
            if self._trace_owner.get(trace_id) == session.key:
                del self._trace_owner[trace_id]
        self._revisions[session.key] = session.revision
        if len(self._revisions) > 100_000:
            self._revisions.popitem(last=False)
        tenant, session_id = split_session_key(session.key)
        finished = self._bounded(session.evidence.finish(session_id, session.revision, reason))
        finished.tenant = tenant
        finished.key_source = session.key_source
        if session.provisional:
            if not (session.evidence.model_seen or session.skill_named) and nothing_to_evaluate(finished):
                self.discarded += 1  # a trace of the harness's own housekeeping: not a session
                return
            self.unkeyed += 1  # no key named it: a session of its own, evaluated, said so
        keep = not session.provisional and reason in _REOPEN_WHOLE
        self.closed_by_reason[reason] = self.closed_by_reason.get(reason, 0) + 1
        if self._on_record is not None:
            self._on_record(
                Closed(
                    session.key,
                    session.revision,
                    reason,
                    session.first_request,
                    session.last_request,
                    tuple(sorted(t.hex() for t in session.traces)),
                )
            )
        self._on_close(finished, reason)
        if keep:
            self._recent[session.key] = _Recent(
                session.evidence,
                session.revision,
                session.first_request,
                session.traces,
                session.spans,
                session.ids,
                session.requests,
                session.bytes + session.carried,
            )
            self.recent_bytes += session.bytes + session.carried
            for trace_id in session.traces:
                self._recent_owner[trace_id] = session.key
            if self._on_keep is not None and self._config.reopen_cache:
                self._on_keep(
                    Reopenable(
                        session.key,
                        session.revision,
                        session.first_request,
                        tuple(session.requests),
                        tuple(sorted(t.hex() for t in session.traces)),
                        session.spans,
                    )
                )
            self._trim_reopenable()
        elif not session.provisional and self._on_forget is not None:
            self._on_forget(session.key)  # what it kept before this revision is not reopened

    def _trim_reopenable(self) -> None:
        """Hold ``_recent`` and ``_dormant`` together to ``reopen_cache``, dormant ones first,
        and ``_recent`` to ``reopen_cache_bytes``, the oldest out first."""
        while self._dormant and len(self._recent) + len(self._dormant) > self._config.reopen_cache:
            key, _ = self._dormant.popitem(last=False)
            self._forget(key)
        limit = self._config.reopen_cache_bytes
        while self._recent and (len(self._recent) > self._config.reopen_cache or self.recent_bytes > limit):
            key = next(iter(self._recent))
            self._forget_recent(key)
            self._forget(key)

    def _forget_recent(self, key: str) -> _Recent | None:
        recent = self._recent.pop(key, None)
        if recent is not None:
            self.recent_bytes -= recent.bytes
            for trace_id in recent.traces:
                if self._recent_owner.get(trace_id) == key:
                    del self._recent_owner[trace_id]
        return recent

    def _forget(self, key: str) -> None:
        self._drop_dormant(key)
        if self._on_forget is not None:
            self._on_forget(key)

    # -- reopening after a restart -----------------------------------------------------------

    def load_dormant(self, entries: Iterable[Reopenable]) -> None:
        """Reopenable revisions found in the store at a restart, oldest first: the first item
        of one makes its session reopen whole once ``restore`` has rebuilt it."""
        for entry in entries:
            if entry.session in self._open or entry.session in self._recent:
                continue
            self._dormant[entry.session] = entry
            for trace in entry.traces:
                self._dormant_traces[bytes.fromhex(trace)] = entry.session
        self._trim_reopenable()

    @property
    def has_dormant(self) -> bool:
        return bool(self._dormant)

    def dormant_in(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        request_id: int = 0,
        tenant: str = "",
    ) -> list[Reopenable]:
        """The dormant revisions that items of ``request`` (from ``tenant``) would reopen
        (taken out of the dormant set: the caller ``restore``s each)."""
        found: dict[str, Reopenable] = {}
        for key, trace_id in self._keys_in(request, tenant):
            if key is None:
                key = self._dormant_traces.get(trace_id)
            if key is None or key in found or key in self._open:
                continue
            if self.skip is not None and self.skip(key, trace_id, request_id):
                continue  # replayed after a restart, already accounted for
            entry = self._dormant.get(key)
            if entry is not None:
                found[key] = entry
        for key in found:
            self._drop_dormant(key)
        return list(found.values())

    def _keys_in(
        self, request: ExportTraceServiceRequest | ExportLogsServiceRequest, tenant: str
    ) -> Iterator[tuple[str | None, bytes]]:
        """(session key, ``scoped`` trace id) of each item of ``request``."""
        if isinstance(request, ExportTraceServiceRequest):
            for resource_spans in request.resource_spans:
                resource = ResourceView(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield (
                            self._key_of(SpanView(span, "", resource).attrs, resource.attrs, tenant),
                            scoped(tenant, span.trace_id),
                        )
        else:
            for resource_logs in request.resource_logs:
                resource = ResourceView(resource_logs.resource)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        yield (
                            self._log_key_of(LogView(record, "", resource), tenant),
                            scoped(tenant, record.trace_id),
                        )

    def _drop_dormant(self, key: str) -> None:
        entry = self._dormant.pop(key, None)
        if entry is not None:
            for trace in entry.traces:
                if self._dormant_traces.get(bytes.fromhex(trace)) == key:
                    del self._dormant_traces[bytes.fromhex(trace)]

    def restore(
        self, entry: Reopenable, requests: Iterable[ExportTraceServiceRequest | ExportLogsServiceRequest]
    ) -> None:
        """Rebuild a dormant revision's evidence from its spooled requests (each item of
        ``entry``'s session: its key, or no key on one of its traces), as if it had just
        closed: the next item under its key reopens it whole, as revision ``entry.revision + 1``."""
        evidence = SessionEvidence(self._rules)
        evidence.catalog.limit = self._config.max_catalog_entries
        tenant = split_session_key(entry.session)[0]  # every request it kept is its tenant's
        traces = {bytes.fromhex(t) for t in entry.traces}
        ids: set[bytes] = set()  # what it took, so a re-sent copy is still one item
        held = 0  # its items' bytes
        for request in requests:
            if isinstance(request, ExportTraceServiceRequest):
                for resource_spans in request.resource_spans:
                    resource = ResourceView(resource_spans.resource)
                    for scope_spans in resource_spans.scope_spans:
                        scope = scope_spans.scope.name
                        for span in scope_spans.spans:
                            if span_problem(span) is not None:
                                continue
                            view = SpanView(span, scope, resource)
                            key, source = self._key_and_source(view.attrs, resource.attrs, tenant)
                            if self._belongs(key, source, span.trace_id, entry.session, traces, tenant):
                                held += span.ByteSize()
                                ids.add(span.trace_id + span.span_id)
                                evidence.observe_span(view)
            else:
                for resource_logs in request.resource_logs:
                    resource = ResourceView(resource_logs.resource)
                    for scope_logs in resource_logs.scope_logs:
                        scope = scope_logs.scope.name
                        for record in scope_logs.log_records:
                            log_view = LogView(record, scope, resource)
                            key, source = self._log_key_and_source(log_view, tenant)
                            if self._belongs(key, source, record.trace_id, entry.session, traces, tenant):
                                held += record.ByteSize()
                                ids.add(log_id(record))
                                evidence.observe_log(log_view)
        self.seed_revision(entry.session, entry.revision)
        self._recent[entry.session] = _Recent(
            evidence,
            entry.revision,
            entry.first_request,
            traces,
            entry.spans,
            ids,
            list(entry.requests),
            held,
        )
        self.recent_bytes += held
        for trace_id in traces:
            self._recent_owner[trace_id] = entry.session
        self._trim_reopenable()

    @staticmethod
    def _belongs(
        found: str | None, source: str, trace_id: bytes, key: str, traces: set[bytes], tenant: str
    ) -> bool:
        """Whether an item whose own session key is ``found`` (named by ``source``) belongs to
        session ``key`` of ``traces``: a key found by shape yields to the trace's session, as
        when the item was first placed."""
        return found == key or ((found is None or _shaped(source)) and scoped(tenant, trace_id) in traces)

    def _bounded(self, session: Session) -> Session:
        """The closed session with each skill body cut to ``sessions.max_skill_body_chars``."""
        limit = self._config.max_skill_body_chars
        for load in session.skill_loads:
            if load.body is not None and len(load.body) > limit:
                cut = len(load.body) - limit
                load.body_cut = cut
                self.bodies_cut += 1
                load.body = (
                    f"{load.body[:limit]}\n[... {cut} characters cut: sessions.max_skill_body_chars ...]"
                )
        return session

    def oldest_request(self) -> int | None:
        """The first spooled request an open session still needs (None: none open)."""
        firsts = [s.first_request for s in self._open.values() if s.first_request]
        return min(firsts) if firsts else None

    def open_sessions(self) -> Iterable[OpenSession]:
        return self._open.values()

    def due(self, session: OpenSession) -> tuple[float, float, str]:
        """(seconds since its last span, seconds until it closes by itself, the rule that
        closes it then: ``idle_timeout`` or ``max_duration``), as ``close_due`` will judge it
        unless a span, the end attribute or a limit comes first."""
        now = self._clock()
        idle = now - session.last_seen
        by_idle = self._config.idle_timeout - idle
        by_age = session.opened_at + self._config.max_duration - now
        if by_idle <= by_age:
            return idle, max(by_idle, 0.0), "idle_timeout"
        return idle, max(by_age, 0.0), "max_duration"

    def loads_so_far(self, key: str) -> int | None:
        """Skill loads detected so far in an open session (None: not open)."""
        session = self._open.get(key)
        return None if session is None else len(session.evidence.skill_loads)
