"""The detection stage: each open session's evidence, fed item by item by the assembler.

The assembler decides which session an item belongs to and when a session closes; the
stage turns the items into evidence and, at close, into the ``Session`` evaluators read.
Two implementations share one interface:

- ``InlineDetection`` builds evidence in this process, as each item is handed over, and
  delivers a closed session at once.
- ``collector.detect.worker.WorkerDetection`` sends each request, and the session of each
  of its items, to a child process running an ``InlineDetection``: detection, most of a
  span's cost, then runs on a second core.  Closed sessions come back asynchronously.

Each request is a ``Batch`` (``begin``): ``resource`` before the items under it, ``span`` /
``log`` for each item placed in a session, then ``end``.  Batches may interleave (a log
request assembled while a trace request pauses); ``fold``, ``finish``, ``reopen`` and
``forget`` apply to every item handed over before them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from google.protobuf.message import Message
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.detect.expectations import NO_RULES, Rules
from collector.detect.session import SessionEvidence
from collector.spans import Attributes, EventField, LogView, ResourceView, SpanView
from evaluators.evidence import Session

Signal = Literal["traces", "logs"]
OnFinished = Callable[[Session, str], None]  # (the closed session, its close reason)


class Batch(Protocol):
    """One request's items, as the assembler places them in sessions."""

    def resource(self, resource: Resource, attrs: Attributes | None = None) -> None:
        """The items that follow, until the next call, are under this resource.  ``attrs``:
        its attributes, if the caller read them already (they are read once)."""

    def span(
        self,
        key: str,
        index: int,
        span: Span | None,
        scope: str,
        attrs: Attributes | None = None,
        events: list[EventField] | None = None,
    ) -> None:
        """Item ``index`` of the request (counted over all its spans) belongs to ``key``.
        ``attrs``, ``events``: what the caller read of it already.  ``span`` is None only
        for a ``Detection`` that does not read spans (``reads_spans``)."""

    def log(self, key: str, index: int, record: LogRecord, scope: str) -> None:
        """Log record ``index`` of the request belongs to ``key``."""

    def end(self) -> None:
        """Every item of the request has been handed over."""


class Detection(Protocol):
    # Whether ``Batch.span`` reads the span objects it is given.  When it does not, the
    # assembler may hand over spans decoded only as far as it reads them itself.
    reads_spans: bool

    def begin(self, signal: Signal, request: Message, raw: bytes | None) -> Batch:
        """A request's items follow (``raw``: its encoded bytes, when the caller has them)."""

    def fold(self, provisional: str, into: str) -> None:
        """The provisional session turned out to be part of ``into``."""

    def finish(self, key: str, revision: int, reason: str, keep: bool) -> None:
        """The session closed: deliver it.  ``keep``: its evidence may be reopened."""

    def reopen(self, key: str) -> None:
        """A kept session's evidence goes on under a new revision."""

    def forget(self, key: str) -> None:
        """A kept session's evidence will not be reopened."""

    async def skill_loads(self, key: str) -> int | None:
        """Skill loads detected so far in an open session (None: not open)."""


class InlineDetection:
    """Evidence built in this process as items arrive; closed sessions delivered at once."""

    reads_spans = True

    def __init__(self, on_finished: OnFinished, rules: Rules = NO_RULES) -> None:
        self._on_finished = on_finished
        self._rules = rules
        self._open: dict[str, SessionEvidence] = {}
        self._kept: dict[str, SessionEvidence] = {}  # closed whole; late items reopen them

    def evidence(self, key: str) -> SessionEvidence:
        evidence = self._open.get(key)
        if evidence is None:
            evidence = self._open[key] = SessionEvidence(self._rules)
        return evidence

    def begin(self, signal: Signal, request: Message, raw: bytes | None) -> Batch:
        return _InlineBatch(self)

    def fold(self, provisional: str, into: str) -> None:
        folded = self._open.pop(provisional, None)
        if folded is not None:
            self.evidence(into).absorb(folded)

    def finish(self, key: str, revision: int, reason: str, keep: bool) -> None:
        evidence = self._open.pop(key, None) or SessionEvidence(self._rules)
        if keep:
            self._kept[key] = evidence
        self._on_finished(evidence.finish(key, revision, reason), reason)

    def reopen(self, key: str) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self._open[key] = kept

    def forget(self, key: str) -> None:
        self._kept.pop(key, None)

    def loads_so_far(self, key: str) -> int | None:
        """Skill loads detected so far in an open session (None: not open)."""
        evidence = self._open.get(key)
        return None if evidence is None else len(evidence.skill_loads)

    async def skill_loads(self, key: str) -> int | None:
        return self.loads_so_far(key)


class _InlineBatch:
    __slots__ = ("_attrs", "_detection", "_resource", "_view")

    def __init__(self, detection: InlineDetection) -> None:
        self._detection = detection
        self._resource: Resource | None = None
        self._attrs: Attributes | None = None
        self._view: ResourceView | None = None

    def _resource_view(self) -> ResourceView:
        if self._view is None:  # built when an item under it is read
            resource = self._resource if self._resource is not None else Resource()
            self._view = ResourceView(resource, self._attrs)
        return self._view

    def resource(self, resource: Resource, attrs: Attributes | None = None) -> None:
        self._resource, self._attrs = resource, attrs
        self._view = None

    def span(
        self,
        key: str,
        index: int,
        span: Span | None,
        scope: str,
        attrs: Attributes | None = None,
        events: list[EventField] | None = None,
    ) -> None:
        assert span is not None  # inline detection reads spans
        view = SpanView(span, scope, self._resource_view(), attrs, events)
        self._detection.evidence(key).observe_span(view)

    def log(self, key: str, index: int, record: LogRecord, scope: str) -> None:
        self._detection.evidence(key).observe_log(LogView(record, scope, self._resource_view()))

    def end(self) -> None:
        self._resource = self._attrs = self._view = None
