"""When a session closes, and what closing it hands on.

Closing: idle timeout, an explicit end attribute (``Assembler`` closes at the end of the
request that set it), max duration, max spans or bytes, shutdown and end of input; never
waiting: a closed session goes to ``on_close`` at once (skill bodies cut to
``sessions.max_skill_body_chars``), and its revision to ``on_record`` with its request range
and traces.  A provisional session (no key named it) that shows nothing to evaluate is
dropped and counted (``discarded``).  Closed for ``idle_timeout`` or ``end_attribute``, a
keyed session is kept for reopening whole (``Kept``); else what it kept before is forgotten.
"""

from __future__ import annotations

from dataclasses import replace

from collector.sessions.binding import Binding
from collector.sessions.held import OpenSession
from collector.state.types import REOPEN_WHOLE, Closed
from evaluators.evidence import Session, split_session_key

__all__ = ["REOPEN_WHOLE", "Closing", "nothing_to_evaluate"]


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


class Closing(Binding):
    """Closes sessions, by limit, by age or idleness, or on demand."""

    def _over_limits(self, session: OpenSession) -> bool:
        if session.spans >= self._config.max_spans:
            self._close(session, "max_spans")
            return True
        if session.bytes >= self._config.max_bytes:
            self._close(session, "max_bytes")
            return True
        return False

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

    def close_all(self, reason: str = "shutdown") -> int:
        sessions = list(self._open.values())
        for session in sessions:
            self._close(session, reason)
        return len(sessions)

    def _close(self, session: OpenSession, reason: str) -> None:
        if self._open.pop(session.key, None) is None:
            return
        self._count_open(session.key, -1)
        self._unhost(session)
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
        keep = not session.provisional and reason in REOPEN_WHOLE
        self.closed_by_reason[reason] = self.closed_by_reason.get(reason, 0) + 1
        traces = tuple(sorted(map(bytes.hex, session.traces)))
        if self._on_record is not None:
            self._on_record(
                Closed(
                    session.key, session.revision, reason, session.first_request, session.last_request, traces
                )
            )
        self._on_close(finished, reason)
        if keep:
            self._keep(session, traces)
        elif not session.provisional:
            self._forget_rows(session.key)  # what it kept before this revision is not reopened

    def _bounded(self, session: Session) -> Session:
        """The closed session with each skill body cut to ``sessions.max_skill_body_chars``
        (a cut load is a new one in the session's list: the evidence may share the old)."""
        limit = self._config.max_skill_body_chars
        loads = session.skill_loads
        for i, load in enumerate(loads):
            if load.body is not None and len(load.body) > limit:
                cut = len(load.body) - limit
                self.bodies_cut += 1
                loads[i] = replace(
                    load,
                    body=f"{load.body[:limit]}\n[... {cut} characters cut: sessions.max_skill_body_chars ...]",
                    body_cut=cut,
                )
        return session

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
