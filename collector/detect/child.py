"""What the detection worker's child does with each message from the parent (compiled: it
runs for every span).  ``collector.detect.worker`` holds the process and its pipes."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from collector.detect.stage import Batch, InlineDetection
from collector.spans import MappedTracesData, Scanned, ScannedTracesData, scan, scanned_view_parts

Item = tuple[Any, str, Resource]  # (span or log record, scope name, resource)


# Where each signal keeps its items: request type, then the repeated fields down to them.
_LAYOUT: dict[str, tuple[type[Message], str, str, str]] = {
    # Spans with their attributes indexed as they are parsed: ``collector.spans.map_entry``.
    "traces": (MappedTracesData, "resource_spans", "scope_spans", "spans"),
    "logs": (ExportLogsServiceRequest, "resource_logs", "scope_logs", "log_records"),
}


def items_of(signal: str, raw: bytes | memoryview) -> tuple[Message, list[Item], list[Scanned] | None]:
    """A request, its items in the order the assembler counts them, and for spans what the
    scanner read of each (parsing and scanning copy what they keep, so ``raw`` may be a
    buffer that is reused)."""
    request_type, by_resource, by_scope, field = _LAYOUT[signal]
    scanned = scan(raw) if signal == "traces" else None
    # Attributes and events scanned: parse the rest only.
    request = (request_type if scanned is None else ScannedTracesData).FromString(raw)
    items = _items(request, by_resource, by_scope, field)
    if scanned is not None and len(scanned) != len(items):  # cannot happen: both read every span
        request, scanned = request_type.FromString(raw), None
        items = _items(request, by_resource, by_scope, field)
    return request, items, scanned


def _items(request: Message, by_resource: str, by_scope: str, field: str) -> list[Item]:
    items: list[Item] = []
    for resource_items in getattr(request, by_resource):
        resource = resource_items.resource
        for scope_items in getattr(resource_items, by_scope):
            scope = scope_items.scope.name
            items += [(item, scope, resource) for item in getattr(scope_items, field)]
    return items


# request number -> its items, what was scanned of them, and its batch: begun, not ended
Requests = dict[int, tuple[list[Item], list[Scanned] | None, Batch]]


def handle(
    message: tuple[Any, ...],
    detection: InlineDetection,
    requests: Requests,
    replies: list[tuple[Any, ...]],
) -> None:
    kind = message[0]
    if kind == "items":
        _, number, signal_name, raw, pairs, last = message
        if raw is not None:
            request, items, scanned = items_of(signal_name, raw)
            batch = detection.begin(signal_name, request, None)  # not raw: its buffer is reused
            requests[number] = (items, scanned, batch)
        items, scanned, batch = requests[number]
        resource: Resource | None = None
        for index, key in pairs:
            item, scope, item_resource = items[index]
            if item_resource is not resource:
                resource = item_resource
                batch.resource(resource)
            if scanned is not None:
                attrs, fields = scanned_view_parts(item.attributes, scanned[index])
                batch.span(key, index, item, scope, attrs, fields)
            elif signal_name == "traces":
                batch.span(key, index, item, scope)
            else:
                batch.log(key, index, item, scope)
        if last:
            batch.end()
            del requests[number]
    elif kind == "finish":
        detection.finish(*message[1:])
    elif kind == "fold":
        detection.fold(*message[1:])
    elif kind == "reopen":
        detection.reopen(message[1])
    elif kind == "forget":
        detection.forget(message[1])
    elif kind == "ask":
        replies.append(("answer", message[1], detection.loads_so_far(message[2])))
