"""Admission and capping of new sessions, per request and per tenant.

``admit`` refuses a request (``Retryable``) while ``sessions.max_open`` sessions are open;
``admit_tenant`` (``TenantLimited``) while a tenant has its own ``max_open_sessions`` open.
``cap_new_sessions`` takes out of a request the spans that would open sessions past either
limit, but only when no retry could ever take them; else it refuses the whole request.
"""

from __future__ import annotations

import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.component import Retryable
from collector.otlp.received import Accepted
from collector.otlp.views import ResourceView, SpanView
from collector.sessions.items import SLICE_SECONDS, Steps, checking_spans, finish, scoped, span_problem
from collector.sessions.restart import Restart
from evaluators.evidence import session_key


class TenantLimited(Retryable):
    """Backpressure for one tenant: it reached a limit of its own."""


class Admission(Restart):
    """Admits requests and caps the sessions they open."""

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
        for r, resource_spans in enumerate(request.resource_spans[:]):  # slices: ``otlp.views``
            resource = ResourceView(resource_spans.resource)
            for s, scope_spans in enumerate(resource_spans.scope_spans[:]):
                for i, span in enumerate(scope_spans.spans[:]):
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
