"""Reopening after a restart: the reopenable revisions found in the store.

A restart loads the store's reopenable revisions as dormant (``load_dormant``); a request
being replayed or newly received that holds an item of one (``dormant_in``) has it rebuilt
first from its spooled requests (``restore``), as if it had just closed, so the item reopens
it whole as the next revision.  ``skip`` (set while a restart replays the spool) leaves out
the items of revisions evaluated before the restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.detect.session import SessionEvidence
from collector.otlp import classes
from collector.otlp.views import LogView, ResourceView, SpanView
from collector.sessions.binding import shaped
from collector.sessions.closing import Closing
from collector.sessions.held import Ids, Recent
from collector.sessions.items import log_id, scoped, span_problem
from collector.state.types import Reopenable
from evaluators.evidence import split_session_key


class Restart(Closing):
    """Rebuilds the reopenable revisions a restart found in the store."""

    def load_dormant(self, entries: Iterable[Reopenable]) -> None:
        """Reopenable revisions found in the store at a restart, oldest first: the first item
        of one makes its session reopen whole once ``restore`` has rebuilt it."""
        for entry in entries:
            if entry.session in self._open or entry.session in self._recent:
                continue
            self._dormant[entry.session] = entry
            self._announced.add(entry.session)  # the store has its rows
            ids = tuple(bytes.fromhex(trace) for trace in entry.traces)
            # A newer entry of a session already loaded replaces it; the older one's traces
            # still lead to it.
            self._dormant_ids[entry.session] = (*self._dormant_ids.get(entry.session, ()), *ids)
            for trace_id in ids:
                self._dormant_traces[trace_id] = entry.session
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
        if classes.is_traces(request):
            for resource_spans in request.resource_spans:
                resource = ResourceView(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield (
                            self._key_of(SpanView(span, "", resource).attrs, resource.attrs, tenant),
                            scoped(tenant, span.trace_id),
                        )
        else:
            for resource_logs in classes.as_logs(request).resource_logs:
                resource = ResourceView(resource_logs.resource)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        yield (
                            self._log_key_of(LogView(record, "", resource), tenant),
                            scoped(tenant, record.trace_id),
                        )

    def restore(
        self, entry: Reopenable, requests: Iterable[ExportTraceServiceRequest | ExportLogsServiceRequest]
    ) -> None:
        """Rebuild a dormant revision's evidence from its spooled requests (each item of
        ``entry``'s session: its key, or no key on one of its traces; a span only on one of
        its traces, as every span placed binds its trace to its session), as if it had just
        closed: the next item under its key reopens it whole, as revision ``entry.revision + 1``."""
        evidence = SessionEvidence(self._rules)
        evidence.catalog.limit = self._config.max_catalog_entries
        tenant = split_session_key(entry.session)[0]  # every request it kept is its tenant's
        traces: Ids = dict.fromkeys(bytes.fromhex(t) for t in entry.traces)
        ids: Ids = {}  # what it took, so a re-sent copy is still one item
        held = 0  # its items' bytes
        for request in requests:
            if classes.is_traces(request):
                for resource_spans in request.resource_spans:
                    resource = ResourceView(resource_spans.resource)
                    for scope_spans in resource_spans.scope_spans:
                        scope = scope_spans.scope.name
                        for span in scope_spans.spans:
                            # Every span placed in a session binds its trace to it, so a span
                            # of none of ``traces`` is not the session's: no key looked for.
                            if scoped(tenant, span.trace_id) not in traces or span_problem(span) is not None:
                                continue
                            view = SpanView(span, scope, resource)
                            key, source = self._key_and_source(view.attrs, resource.attrs, tenant)
                            if self._belongs(key, source, span.trace_id, entry.session, traces, tenant):
                                held += span.ByteSize()
                                ids[span.trace_id + span.span_id] = None
                                evidence.observe_span(view)
            else:
                for resource_logs in classes.as_logs(request).resource_logs:
                    resource = ResourceView(resource_logs.resource)
                    for scope_logs in resource_logs.scope_logs:
                        scope = scope_logs.scope.name
                        for record in scope_logs.log_records:
                            log_view = LogView(record, scope, resource)
                            key, source = self._log_key_and_source(log_view, tenant)
                            if self._belongs(key, source, record.trace_id, entry.session, traces, tenant):
                                held += record.ByteSize()
                                ids[log_id(record)] = None
                                evidence.observe_log(log_view)
        self.seed_revision(entry.session, entry.revision)
        self._recent[entry.session] = Recent(
            evidence,
            entry.revision,
            entry.first_request,
            traces,
            entry.spans or len(ids),  # 0: not known (``unwritten_kept``), counted here
            ids,
            list(entry.requests),
            held,
        )
        self.recent_bytes += held
        for trace_id in traces:
            self._recent_owner[trace_id] = entry.session
        self._trim_reopenable()

    @staticmethod
    def _belongs(found: str | None, source: str, trace_id: bytes, key: str, traces: Ids, tenant: str) -> bool:
        """Whether an item whose own session key is ``found`` (named by ``source``) belongs to
        session ``key`` of ``traces``: a key found by shape yields to the trace's session, as
        when the item was first placed."""
        return found == key or ((found is None or shaped(source)) and scoped(tenant, trace_id) in traces)
