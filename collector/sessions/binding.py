"""Which session an item joins: its key, and the session its trace is bound to.

Session key: the first present of the configured keys (span or resource attributes; for a
log record with none, the same keys among the fields its body holds), else one found by
its shape (``SessionKeys``), within the item's tenant (``session_key``).  An item without a
key joins whatever session its trace is bound to; a trace seen with no key at all becomes a
provisional session of its own, folded into the keyed session as soon as a sibling names
one.  A key found by shape yields to a configured one.  Starting a session under a key kept
for reopening reopens it as the next revision, carrying the earlier ones.

A trace may hold several sessions (a server running one session after another in one
trace).  An item without a key in such a trace joins the session that took the span it was
logged under (a log record) or its parent span (a span), when one of them did; a span
whose parent comes after it in its request (children are exported first) joins the session
its nearest keyed ancestor there names; only else the session the trace was bound to last.  Which session is placed last, and whether spans
or log records are assembled first, then changes nothing for such an item: a log record
whose span none of them has taken yet is held until it comes (``early_logs``).
"""

from __future__ import annotations

from collections.abc import Callable

from collector.detect.session import SessionEvidence
from collector.otlp.views import Attributes, LogView
from collector.sessions.held import OpenSession
from collector.sessions.kept import Kept
from evaluators.evidence import session_key, split_session_key

_CONFIGURED = "configured:"
_MAX_ALIASES = 100_000  # shaped keys remembered as leading to a configured key's session


def shaped(source: str) -> bool:
    """Whether ``source`` (``OpenSession.key_source``) is a key found by shape."""
    return source.startswith("shape:")


class Binding(Kept):
    """Finds an item's session key and binds it, and its trace, to an open session."""

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
        named = self._finder.named(values, resource)
        if named is not None:
            return session_key(tenant, named[0]), named[1]
        if self._keyed(trace):
            return None, "trace"
        found = self._finder.shaped(values, resource)
        if found is None:
            return None, "trace"
        key = session_key(tenant, found.value)
        return self._aliases.get(key, key), f"{found.source}:{found.attribute}"

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
        near: bytes = b"",
        ancestor: Callable[[bytes, bytes], OpenSession | None] | None = None,
    ) -> OpenSession:
        """``trace_id``: ``scoped`` to ``tenant``; ``source``: what named ``key``; ``near``:
        for an item without a key, the span it belongs under (a log record's span, a span's
        parent); ``ancestor``: for a span in a trace bound to several open sessions whose
        parent none of them took yet, the session a keyed ancestor in its request names (the
        parent comes after it, as children are exported first).  A key found by shape yields to a configured one: a trace bound to a session
        a configured key named stays there, and a session a shaped key named is folded into
        the configured one that names one of its traces (its key then leads there)."""
        owner = self._trace_owner.get(trace_id) if trace_id else None
        if key is None:
            holder = self._holder(trace_id, near)
            if holder is None and ancestor is not None and near and trace_id in self._hosts:
                holder = ancestor(trace_id, near)
            if holder is not None:
                return self._touch(holder, request_id)
            if owner is not None and owner in self._open:
                return self._touch(self._open[owner], request_id)
            # The trace is its own session until a sibling names one.
            key = session_key(tenant, trace_id[-16:].hex())
            session = self._open.get(key) or self._start(key, now, provisional=True)
        else:
            bound = self._open.get(owner) if owner is not None and owner != key else None
            if bound is not None and shaped(source) and bound.key_source.startswith(_CONFIGURED):
                return self._touch(bound, request_id)
            taken = bound.evidence if bound is not None and bound.provisional else None  # folded below
            session = self._open.get(key) or self._start(
                key, now, provisional=False, source=source, taken=taken
            )
            if shaped(session.key_source) and not shaped(source):
                session.key_source = source  # a configured key names it too
            if bound is not None and (
                bound.provisional or (shaped(bound.key_source) and not shaped(session.key_source))
            ):
                if not bound.provisional:
                    self._aliases[bound.key] = session.key
                    if len(self._aliases) > _MAX_ALIASES:
                        self._aliases.popitem(last=False)
                self._fold(bound, into=session)
        if trace_id and trace_id not in session.traces:
            session.traces[trace_id] = None
            self._host(trace_id, session.key, take=True)
        return self._touch(session, request_id)

    def _holder(self, trace_id: bytes, near: bytes) -> OpenSession | None:
        """Of the open sessions a trace bound to several is bound to (``_hosts``), the one
        that took its span ``near``; None for a trace bound to one session at most, or a span
        none of them took (yet)."""
        hosts = self._hosts.get(trace_id) if near else None
        if hosts is None:
            return None
        ident = trace_id[-16:] + near  # as ``Assembler._place`` names a span
        for key in hosts:
            session = self._open.get(key)
            if session is not None and ident in session.ids:
                return session
        return None

    def hosts_taken(self, trace_id: bytes, ident: bytes) -> bool | None:
        """For a trace bound to several open sessions: whether one of them took an item
        ``ident`` already; None for any other trace."""
        hosts = self._hosts.get(trace_id)
        if hosts is None:
            return None
        return any(ident in session.ids for key in hosts if (session := self._open.get(key)) is not None)

    def _host(self, trace_id: bytes, key: str, *, take: bool) -> None:
        """Bind ``trace_id`` to the open session ``key`` as well: its owner (the session its
        unkeyed items join) when ``take`` or when it has no open one.  A trace then bound to
        several open sessions is remembered with each of them (``_hosts``)."""
        owner = self._trace_owner.get(trace_id)
        if owner is None or owner == key or owner not in self._open:
            self._trace_owner[trace_id] = key
            return
        hosts = self._hosts.setdefault(trace_id, [owner])
        if key not in hosts:
            hosts.append(key)
        if take:
            self._trace_owner[trace_id] = key

    def _unhost(self, session: OpenSession) -> None:
        """Unbind a session leaving the open ones (closed, or folded into another) from its
        traces; a trace it owned passes to the open session bound to it last, if any."""
        for trace_id in session.traces:
            hosts = self._hosts.get(trace_id)
            rest = [key for key in hosts if key != session.key] if hosts is not None else []
            if len(rest) > 1:
                self._hosts[trace_id] = rest
            elif hosts is not None:
                del self._hosts[trace_id]
            if self._trace_owner.get(trace_id) == session.key:
                if rest:
                    self._trace_owner[trace_id] = rest[-1]
                else:
                    del self._trace_owner[trace_id]

    def _touch(self, session: OpenSession, request_id: int) -> OpenSession:
        self._open.move_to_end(session.key)
        if request_id:  # the spooled requests this session needs after a restart
            if not session.first_request:
                session.first_request = request_id
            if request_id > session.last_request:
                session.last_request = request_id
            requests = session.requests
            if not requests or requests[-1] != request_id:
                requests.append(request_id)
        return session

    def _start(
        self,
        key: str,
        now: float,
        provisional: bool,
        source: str = "trace",
        taken: SessionEvidence | None = None,
    ) -> OpenSession:
        """``taken``: the evidence of a provisional session the new one folds in at once
        (``_fold``).  A session that reopens no revision kept whole starts with it as its
        own: what ``SessionEvidence.absorb`` makes of an empty session's evidence (it takes
        over every container of the other), without a new one made first."""
        recent = self._forget_recent(key)
        revision = max(self._revisions.pop(key, 0), recent.revision if recent else 0) + 1
        if revision > 1:
            self.reopened += 1
        if recent is not None:
            evidence = recent.evidence
        elif taken is not None:
            evidence = taken
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
        self._open[key] = session
        if recent is not None:
            for trace_id in recent.traces:
                self._host(trace_id, key, take=False)
        self._count_open(key, 1)
        self._opened_order.append((now, key, revision))
        return session

    def _count_open(self, key: str, change: int) -> None:
        tenant = split_session_key(key)[0]
        self.open_by_tenant[tenant] = self.open_by_tenant.get(tenant, 0) + change

    def _fold(self, provisional: OpenSession, into: OpenSession) -> None:
        del self._open[provisional.key]
        self._unhost(provisional)
        self._count_open(provisional.key, -1)
        if into.evidence is not provisional.evidence:  # else taken over when ``into`` started
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
            into.traces[trace_id] = None
            self._host(trace_id, into.key, take=True)
