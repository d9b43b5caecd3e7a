"""The sessions stage's metrics: items taken, sessions open, closed and reopened."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class SessionsMetrics:
    """Items and sessions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.received = Counter(
            "skillgauge_received_items",
            "Spans and log records received, by signal and protocol.",
            ["signal", "protocol"],
            registry=r,
        )
        self.rejected = Counter(
            "skillgauge_rejected_items",
            "Spans and log records not accepted, by signal and reason.",
            ["signal", "reason"],
            registry=r,
        )
        self.unreadable = Counter(
            "skillgauge_unreadable_items",
            "Spans and log records taken but not readable or detectable (each named in its "
            "session's coverage), by signal and reason (too_deep, bad_value, internal_error).",
            ["signal", "reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "skillgauge_duplicate_items",
            "Spans and log records received again by a session that had them (a re-sent "
            "request): acknowledged, counted once in the session, by signal.",
            ["signal"],
            registry=r,
        )
        self.sessions_open = Gauge("skillgauge_sessions_open", "Sessions currently open.", registry=r)
        self.sessions_closed = Counter(
            "skillgauge_sessions_closed", "Sessions closed, by reason.", ["reason"], registry=r
        )
        self.traces_discarded = Counter(
            "skillgauge_traces_discarded",
            "Traces that named no session and closed showing no agent at work (no agent span, "
            "turn, tool call, skill load, catalog or expected skill): a harness's housekeeping, "
            "not evaluated.",
            registry=r,
        )
        self.sessions_unkeyed = Counter(
            "skillgauge_sessions_unkeyed",
            "Traces that named no session (no configured key, none shaped like one) and were "
            "evaluated as a session of their own, as they showed an agent at work or skill "
            "evidence; their coverage line says key_source trace.",
            registry=r,
        )
        self.skill_bodies_cut = Counter(
            "skillgauge_skill_bodies_cut",
            "Skill bodies cut at sessions.max_skill_body_chars (the load says body_truncated in "
            "its session's coverage).",
            registry=r,
        )
        self.sessions_reopened = Counter(
            "skillgauge_sessions_reopened", "Sessions reopened by late spans (a new revision).", registry=r
        )
        self.pending_requests = Gauge(
            "skillgauge_pending_requests",
            "Acknowledged trace requests waiting, by stage (assembler).  At "
            "sessions.max_pending_requests, backpressure.",
            ["stage"],
            registry=r,
        )
        self.waiting_for_room = Gauge(
            "skillgauge_requests_waiting_for_room",
            "Requests, not yet spooled nor acknowledged, waiting up to sessions.pending_wait "
            "for room in the assembler's full queue.",
            registry=r,
        )
