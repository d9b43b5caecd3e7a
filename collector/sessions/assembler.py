"""Group spans and log records into sessions, and decide when a session is closed.

``Assembler`` is the one object the sessions stage uses; it takes items in (this module) and
is built on ``Admission`` (admission.py), ``Restart`` (restart.py), ``Closing``
(closing.py), ``Binding`` (binding.py), ``Kept`` (kept.py) and ``Held`` (held.py).

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

import bisect
import logging
import time
from collections.abc import Iterable, Iterator

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.otlp import classes, inplace
from collector.otlp.received import Accepted
from collector.otlp.views import LogView, ResourceView, SpanView
from collector.sessions.admission import Admission, TenantLimited
from collector.sessions.binding import shaped
from collector.sessions.closing import nothing_to_evaluate
from collector.sessions.early_logs import EarlyLog, EarlyLogs
from collector.sessions.held import CLOSE_REASONS, OpenSession
from collector.sessions.items import (
    SLICE_SECONDS,
    UNCORRELATED,
    ZERO_TRACE,
    Steps,
    check_spans,
    checking_spans,
    finish,
    ids_problem,
    log_digest,
    log_id,
    scoped,
    span_problem,
)
from collector.sessions.keys import mentions_skills
from collector.state.types import Reopenable
from evaluators.evidence import UnreadableItem, session_key

__all__ = [
    "CLOSE_REASONS",
    "SLICE_SECONDS",
    "UNCORRELATED",
    "UNREADABLE_REASONS",
    "Accepted",
    "Assembler",
    "OpenSession",
    "Steps",
    "TenantLimited",
    "check_spans",
    "checking_spans",
    "finish",
    "ids_problem",
    "log_id",
    "nothing_to_evaluate",
    "scoped",
    "span_problem",
]

UNREADABLE_REASONS = ("too_deep", "bad_value", "internal_error")
RUNS = True  # a span that continues a run joins its session directly (off: every span is placed)


_UNREADABLE_DETAIL_CHARS = 300
log = logging.getLogger("skillgauge")


class _Kin:
    """The spans of one request by id, indexed on first use: the open session a key on the
    nearest keyed ancestor of a span names, within the request (children are exported before
    their parents, often in the same request)."""

    _MAX_HOPS = 64

    def __init__(self, assembler: Assembler, request: ExportTraceServiceRequest, tenant: str) -> None:
        self._assembler = assembler
        self._request = request
        self._tenant = tenant
        self._spans: dict[bytes, tuple[Span, str, ResourceView]] | None = None

    def keyed(self, trace: bytes, parent: bytes) -> OpenSession | None:
        """The open session the nearest ancestor of a span (from its ``parent``) in this
        request names by its key; None when none of them within the request has one."""
        if self._spans is None:
            self._spans = {
                span.trace_id + span.span_id: (span, ss.scope.name, ResourceView(rs.resource))
                for rs in self._request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            }
        trace_id = trace[-16:]
        for _ in range(self._MAX_HOPS):
            found = self._spans.get(trace_id + parent) if parent else None
            if found is None:
                return None
            span, scope, resource = found
            key = self._assembler._key_of(SpanView(span, scope, resource).attrs, resource.attrs, self._tenant)
            if key is not None:
                return self._assembler.get(key)
            parent = span.parent_span_id
        return None


class Assembler(Admission):
    """Takes spans and log records in, each into its session."""

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
        rebuilds: bool = False,
    ) -> Iterator[Reopenable | None]:
        """Place each span of a request (from ``tenant``) in its session and hand it to that
        session's evidence, pausing (yielding None) once ``slice_seconds`` have passed since it
        started or last paused, so that a caller on the event loop can let other work
        (acknowledgements) through in between.

        ``rebuilds``: a span of a kept session held as its request ids only (dormant: kept
        since a restart, or while ``rebuild_kept``) yields that entry, taken out of the
        dormant set, before the span is placed: the caller ``restore``s it from its spooled
        requests, and the span then reopens it whole.  Without it, the caller has rebuilt
        what the request reopens before (``dormant_in``).

        ``raw``: the request as received, when known.  Each span then counts an equal share
        of its size towards ``max_bytes`` instead of being measured (measuring a span means
        walking all of it again)."""
        now = self._clock()
        touched: dict[str, OpenSession] = {}
        kin = _Kin(self, request, tenant)
        share: int | None = None
        places: Iterator[tuple[int, int]] | None = None  # each span's place in ``raw`` (``inplace``)
        if raw is not None:
            spans = sum(len(ss.spans) for rs in request.resource_spans[:] for ss in rs.scope_spans[:])
            share = len(raw) // max(1, spans)
            if inplace.worth_it(raw, spans):
                places = inplace.span_ranges(raw)
        clock = time.perf_counter
        pause_at = clock() + slice_seconds
        # A run: the session the last span joined, while the next span of its key, source and
        # trace would join it too (``_bound``: bound to it alone, no early records held) and
        # it was touched for this request: such a span is counted in it without ``_place``.
        run: OpenSession | None = None
        run_key = run_source = run_trace = None
        # Slices, not the repeated fields: see ``collector.otlp.views``.
        for resource_spans in request.resource_spans[:]:
            resource = ResourceView(resource_spans.resource)
            on_resource = resource.attrs
            for scope_spans in resource_spans.scope_spans[:]:
                scope = scope_spans.scope.name
                for span in scope_spans.spans[:]:
                    trace_id = span.trace_id
                    span_id = span.span_id
                    in_place = None
                    if places is not None and raw is not None:  # every span's, in order, before anything else
                        in_place, places = inplace.next_span(raw, places, trace_id, span_id)
                    if clock() >= pause_at:
                        run = None  # other work may change the sessions while paused
                        yield None
                        pause_at = clock() + slice_seconds
                    problem = ids_problem(trace_id, span_id)
                    if problem is not None:
                        result.reject(problem)
                        continue
                    session: OpenSession | None = None
                    before = result.accepted
                    try:
                        view = SpanView(span, scope, resource, in_place, trace_id, span_id)
                        size = span.ByteSize() if share is None else share
                        trace = scoped(tenant, trace_id) if tenant else trace_id
                        found = self._key_and_source(view.attrs, on_resource, tenant, trace)
                        if rebuilds and self._dormant:
                            entry = self._waking(found[0], trace, request_id)
                            if entry is not None:
                                run = None
                                yield entry
                        ident = trace_id + span_id
                        if (
                            run is not None
                            and RUNS
                            and trace == run_trace
                            and found[0] == run_key
                            and found[1] == run_source
                            and ident not in run.ids
                            and not self._early.held
                        ):
                            session = self._join(run, view, ident, size, now, result)  # ``_place``'s answer
                        else:
                            run = self._bound(found[0], trace, ident)
                            run_key, run_source = found
                            run_trace = trace
                            session = self._place(
                                found, run, view, trace, ident, size, request_id, result, now, tenant, kin
                            )
                            if session is not run or self.skip is not None:
                                run = None  # the next span of this key and trace may join another
                            if session is None:
                                continue
                        session.evidence.observe_span(view)
                        if self._early.held:  # records logged under this span, come before it
                            run = None
                            self._let_go(self._early.take_span(trace, span_id), now, session)
                    except Exception as err:  # this span alone: its neighbours go on as if it were not sent
                        run = None
                        result.accepted = before + 1  # acknowledged: taken, though unreadable
                        self._unreadable("span", trace_id, span_id, session, err)
                        if session is None:
                            continue
                    touched[session.key] = session
                    if self._over_limits(session):
                        touched.pop(session.key, None)
                        run = None
        for session in touched.values():
            if session.ending:
                self._close(session, "end_attribute")

    def _waking(self, key: str | None, trace: bytes, request_id: int) -> Reopenable | None:
        """The dormant entry an item of ``key`` (or, keyed by none, of ``trace``) reopens,
        taken out of the dormant set; None when it reopens none."""
        if key is None:
            key = self._dormant_traces.get(trace)
        if key is None or key in self._open or key not in self._dormant:
            return None
        if self.skip is not None and self.skip(key, trace, request_id):
            return None
        entry = self._dormant[key]
        self._drop_dormant(key)
        return entry

    def _place(
        self,
        found: tuple[str | None, str],
        bound: OpenSession | None,
        view: SpanView,
        trace: bytes,
        ident: bytes,
        size: int,
        request_id: int,
        result: Accepted,
        now: float,
        tenant: str,
        kin: _Kin | None = None,
    ) -> OpenSession | None:
        """The open session a usable span joins (``found``: its key and what named it,
        ``_key_and_source``), counted in it; None for a span that an
        evaluation before a restart already accounted for, or that its session has taken
        already (a re-sent span).  ``bound``: its ``_bound`` session.  ``trace``: its trace
        id, ``scoped``; ``ident``: its trace id and span id.  ``kin``: its request's spans, for the keyed ancestor of an unkeyed
        span in a trace of several sessions (``Binding._session_for``)."""
        key, source = found
        if self.skip is not None and self.skip(key, trace, request_id):
            result.accepted += 1  # evaluated before the restart: accounted for
            return None
        session = bound
        if session is None:
            if self._taken(key, trace, ident, tenant):
                result.accepted += 1
                self._duplicate("traces")
                return None
            session = self._session_for(
                key,
                trace,
                now,
                request_id,
                tenant,
                source,
                near=view.span.parent_span_id,
                ancestor=kin.keyed if kin else None,
            )
        elif ident in session.ids:
            result.accepted += 1
            self._duplicate("traces")
            return None
        else:
            if (
                key is not None
                and source is not session.key_source
                and shaped(session.key_source)
                and not shaped(source)
            ):
                session.key_source = source  # a configured key names it too (``_session_for``)
            self._touch(session, request_id)
        return self._join(session, view, ident, size, now, result)

    def _join(
        self, session: OpenSession, view: SpanView, ident: bytes, size: int, now: float, result: Accepted
    ) -> OpenSession:
        """A span (``ident``) counted in the open session it joins; returns the session."""
        values = view.attrs
        if session.provisional and not session.skill_named:
            session.skill_named = mentions_skills(values)
        session.ids[ident] = None
        session.spans += 1
        session.bytes += size
        session.last_seen = now
        end = self._config.end_attribute
        if end in values.by_key() and values.get(end) in (True, "true", "True", 1):
            session.ending = True
        result.accepted += 1
        return session

    def _bound(self, key: str | None, trace: bytes, ident: bytes) -> OpenSession | None:
        """The open session a span joins when its trace is bound to that session alone and
        its key names that session or none (nearly every span): the one ``_taken`` and
        ``_session_for`` would find, whose only change there is the session's ``key_source``
        (a configured key names a session a shaped one named).  None in any other case, which
        they decide.  ``trace``: ``scoped``; ``ident``: the span's id."""
        owner = self._trace_owner.get(trace)
        if key is None:
            if not owner or trace in self._hosts or (self._early.held and self._early.holds(trace, ident)):
                return None
            return self._open.get(owner)
        if owner != key:
            return None
        session = self._open.get(key)
        return session if session is not None and trace in session.traces else None

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
        for resource_logs in request.resource_logs[:]:  # slices: see ``collector.otlp.views``
            resource = ResourceView(resource_logs.resource)
            kept: Resource | None = None  # a copy for held records: the request is not kept alive
            for scope_logs in resource_logs.scope_logs[:]:
                scope = scope_logs.scope.name
                for record in scope_logs.log_records[:]:
                    session: OpenSession | None = None
                    try:
                        view = LogView(record, scope, resource)
                        trace_id = scoped(
                            tenant,
                            record.trace_id
                            if len(record.trace_id) == 16 and record.trace_id != ZERO_TRACE
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
                        ident = log_digest(encoded)
                        if self._taken(key, trace_id, ident, tenant):
                            result.accepted += 1
                            self._duplicate("logs")
                            continue
                        bound_to = self._early_for(key, trace_id, record.span_id)
                        if bound_to is not None:
                            if kept is None:
                                kept = type(resource_logs.resource)()  # OTLP's class or ours
                                kept.CopyFrom(resource_logs.resource)
                            early = EarlyLog(
                                trace_id,
                                record.span_id,
                                ident,
                                encoded,
                                kept,
                                scope,
                                request_id,
                                tenant,
                                bound_to,
                            )
                            result.accepted += 1
                            self._let_go(self._early.add(early), now)  # what a bound lets go
                            continue
                        session = self._session_for(
                            key, trace_id, now, request_id, tenant, source, near=record.span_id
                        )
                        if session.provisional and not session.skill_named:
                            session.skill_named = mentions_skills(view.attrs)
                        session.ids[ident] = None
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
            if self._early and self._early.holds(trace_id, ident):
                return True
            shared = self.hosts_taken(trace_id, ident)
            if shared is not None:  # a trace of several open sessions: any of them
                return shared
            owner = self._trace_owner.get(trace_id) or self._recent_owner.get(trace_id) if trace_id else None
            key = owner if owner is not None else session_key(tenant, trace_id[-16:].hex())
        session = self._open.get(key)
        if session is not None:
            return ident in session.ids
        recent = self._recent.get(key)
        return recent is not None and ident in recent.ids

    def _early_for(self, key: str | None, trace_id: bytes, span_id: bytes) -> str | None:
        """For a log record to hold (``early_logs``): the session its trace is bound to now;
        None to place it now.  Held: a record that names no session, logged under a span that
        none of the open sessions its trace is bound to has taken yet, in a trace bound to
        several (the one case where the binding may not be its session's).  A trace bound to
        one session places it there at once, as it places an unkeyed span: nearly every trace
        holds one session, and its records wait for nothing."""
        hosts = self._hosts.get(trace_id) if key is None and trace_id else None
        if hosts is None or len(span_id) != 8 or span_id == bytes(8):
            return None
        ident = trace_id[-16:] + span_id  # as ``_place`` names a span
        for bound in hosts:
            session = self._open.get(bound)
            if session is not None and ident in session.ids:
                return None
        return self._trace_owner.get(trace_id)

    def _let_go(self, records: list[EarlyLog], now: float, into: OpenSession | None = None) -> None:
        """Place held records: in ``into`` (the session that took their span, or the one
        closing that their trace was bound to when they came), else where they would have gone
        unheld (the session their trace was bound to then, if open, else its binding now)."""
        for early in records:
            session = into
            try:
                if session is None:
                    session = self._open.get(early.bound_to) or self._session_for(
                        None, early.trace, now, early.request_id, early.tenant, near=early.span_id
                    )
                self._took_early(session, early.request_id)
                view = LogView(
                    classes.LogRecord.FromString(early.encoded), early.scope, ResourceView(early.resource)
                )
                if session.provisional and not session.skill_named:
                    session.skill_named = mentions_skills(view.attrs)
                session.ids[early.ident] = None
                session.bytes += len(early.encoded)
                session.evidence.observe_log(view)
            except Exception as err:  # this record alone, as when placed on arrival
                self._unreadable("log", early.trace, early.span_id, session, err)

    def _took_early(self, session: OpenSession, request_id: int) -> None:
        """``session`` took a record of an earlier request than its last: its request range
        and its list of requests (kept in order) take it in, for a restart and a reopen."""
        if not request_id:
            return
        session.first_request = min(session.first_request or request_id, request_id)
        session.last_request = max(session.last_request, request_id)
        at = bisect.bisect_left(session.requests, request_id)
        if at == len(session.requests) or session.requests[at] != request_id:
            session.requests.insert(at, request_id)

    def _close(self, session: OpenSession, reason: str) -> None:
        """Records held in its traces that came while it was their binding (or while a
        session since folded was) are placed in it first: where they would have gone unheld."""
        if self._early and session.key in self._open:
            waiting = self._early.take_bound_to(
                session.traces, lambda key: key == session.key or key not in self._open
            )
            self._let_go(waiting, self._clock(), session)
        super()._close(session, reason)

    def close_all(self, reason: str = "shutdown") -> int:
        if self._early:
            self._let_go(self._early.take_all(), self._clock())
        return super().close_all(reason)

    @property
    def early_logs(self) -> EarlyLogs:
        """Unkeyed log records held for their span (``early_logs``)."""
        return self._early

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

    def oldest_request(self) -> int | None:
        """The first spooled request an open session still needs (None: none open)."""
        firsts = [s.first_request for s in self._open.values() if s.first_request]
        held = self._early.oldest_request() if self._early else None
        if held is not None:
            firsts.append(held)
        return min(firsts) if firsts else None

    def open_sessions(self) -> Iterable[OpenSession]:
        return self._open.values()

    def loads_so_far(self, key: str) -> int | None:
        """Skill loads detected so far in an open session (None: not open)."""
        session = self._open.get(key)
        return None if session is None else len(session.evidence.skill_loads)
