"""OTLP request bodies (protobuf or JSON, decompressed) to protobuf request messages.

OTLP/JSON differs from protobuf's canonical JSON in one dangerous way: trace and span ids
are hex, not base64.  Stock ``json_format.Parse`` would read them as base64 and silently
corrupt them, so ids are rewritten to base64 before parsing.  An id that is not valid hex
becomes empty, and the span or record carrying it is rejected on its own later (partial
success) instead of failing the whole request.  An id written in base64 (what a client
using protobuf's own JSON mapping sends) fails the request with a message saying OTLP/JSON
wants hex: every id of such a client is wrong, and its spans would otherwise vanish one
by one as invalid.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Generator
from typing import Any, Literal, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp import classes, wire
from collector.receiver.errors import InvalidRequest, UnsupportedMedia
from collector.telemetry import RateLimitedLog

Signal = Literal["traces", "logs"]
Encoding = Literal["protobuf", "json"]
M = TypeVar("M", bound=Message)

# OTLP's own: what OTLP/JSON is read into (and what errors name).
REQUEST_TYPES: dict[Signal, type[Message]] = {
    "traces": ExportTraceServiceRequest,
    "logs": ExportLogsServiceRequest,
}
# The chain's (attributes as maps, ``collector.otlp.classes``): what protobuf is read into.
PARSED_TYPES: dict[Signal, type[Message]] = {"traces": classes.TraceRequest, "logs": classes.LogsRequest}

# Where ids live in each signal's JSON: (list path to the records, id keys in a record).
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
_TOO_DEEP = "body nests too deeply to be read as OTLP/JSON"
_warn_bad_text = RateLimitedLog(logging.getLogger("skillgauge"), logging.WARNING, 60.0)
_SURROGATE = "surrogate"  # in protobuf's ParseError for a string holding one, any case
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def media_encoding(content_type: str | None) -> Encoding:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "application/x-protobuf":
        return "protobuf"
    if media == "application/json":
        return "json"
    raise UnsupportedMedia(
        f"unsupported Content-Type {media or '(none)'!r}: send application/x-protobuf or application/json"
    )


def decode(signal: Signal, body: bytes, encoding: Encoding) -> Message:
    """``body`` as the chain reads it (``PARSED_TYPES``)."""
    if encoding == "protobuf":
        return parse_protobuf(PARSED_TYPES[signal], body)
    return classes.received(parse_json(REQUEST_TYPES[signal], body))


def parse_protobuf(message_type: type[M], body: bytes) -> M:
    """``body`` as a ``message_type``; text that is not UTF-8 is read with U+FFFD in its place
    and values nested deeper than protobuf reads are left out (``wire.parse``: the request's
    other items are not lost for one such value), and logged."""
    message = message_type()
    try:
        replaced = wire.parse(message, body)
    except (DecodeError, RuntimeWarning) as err:
        raise InvalidRequest(f"body is not a valid {message_type.__name__} protobuf: {err}") from None
    if replaced:
        _warn_bad_text(
            "a %s held text that is not UTF-8 or values nested deeper than %d messages: read with "
            "U+FFFD in place of each bad sequence and without what lies deeper",
            message_type.__name__,
            wire.MAX_DEPTH,
        )
    return message  # type: ignore[no-any-return]  # protobuf stubs type messages loosely


Steps = Generator[None, None, M]  # pauses (yields) between slices; returns the message
_SLICE_ITEMS = 2_000  # spans or log records converted between two pauses
# (resources, scopes, items) keys of each request type, as OTLP/JSON and as protobuf names them
_NESTING = (
    (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",)),
    (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records")),
)


def finish(steps: Steps[M]) -> M:
    """What ``steps`` return, run without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def parse_json(message_type: type[M], body: bytes) -> M:
    """``body`` as a ``message_type`` (``parsing_json`` without pauses)."""
    return finish(parsing_json(message_type, body))


def parsing_json(message_type: type[M], body: bytes) -> Steps[M]:
    """``body`` as a ``message_type``, converted ``_SLICE_ITEMS`` spans or log records at a
    time with a pause (a yield) after each slice, so that a caller on the event loop lets
    other work through.  Text that is not UTF-8, and a lone surrogate escaped in
    a string ("\\ud83d": what JavaScript's ``JSON.stringify`` writes for a string cut in the
    middle of a character), which protobuf refuses with the whole request, are read with
    U+FFFD in their place, and logged."""
    try:
        try:
            data = json.loads(body)
        except UnicodeDecodeError:
            data = json.loads(body.decode("utf-8", "replace"))
            _warn_bad_text(
                "an OTLP/JSON %s held text that is not UTF-8: read with U+FFFD", message_type.__name__
            )
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidRequest(f"body is not valid JSON: {err}") from None
    except RecursionError:
        raise InvalidRequest(_TOO_DEEP) from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"body must be a JSON object holding {message_type.__name__} fields")
    _hex_ids_to_base64(data)
    message = message_type()
    try:
        try:
            yield from _parse_sliced(data, message)
        except json_format.ParseError as err:
            if _SURROGATE not in str(err).lower():
                raise
            message = message_type()
            json_format.ParseDict(_without_lone_surrogates(data), message, ignore_unknown_fields=True)
            _warn_bad_text("an OTLP/JSON %s held a lone surrogate: read as U+FFFD", message_type.__name__)
    except (json_format.ParseError, ValueError, TypeError) as err:
        raise InvalidRequest(f"body is not a valid OTLP/JSON {message_type.__name__}: {err}") from None
    except RecursionError:
        raise InvalidRequest(_TOO_DEEP) from None
    return message  # type: ignore[no-any-return]


def _parse_sliced(data: dict[str, Any], message: Message) -> Generator[None, None, None]:
    """``json_format.ParseDict(data, message)``, resource by resource, scope by scope and
    ``_SLICE_ITEMS`` items at a time, pausing after each slice.  Anything not shaped as a
    request's lists is converted whole, so its errors are the same."""
    fields = message.DESCRIPTOR.fields_by_name
    found = next(
        (
            (keys, key)
            for keys in _NESTING
            if keys[0][1] in fields  # this message's own lists: another signal's are unknown fields
            for key in keys[0]
            if isinstance(data.get(key), list)
        ),
        None,
    )
    if found is None:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
        return
    (resources_keys, scopes_keys, items_keys), resources_key = found
    json_format.ParseDict(_without(data, resources_key), message, ignore_unknown_fields=True)
    resources = getattr(message, resources_keys[1])
    for resource in data[resources_key]:
        target = resources.add()
        scopes_key = next((k for k in scopes_keys if isinstance(resource, dict) and k in resource), None)
        if scopes_key is None or not isinstance(resource[scopes_key], list):
            json_format.ParseDict(resource, target, ignore_unknown_fields=True)
            continue
        json_format.ParseDict(_without(resource, scopes_key), target, ignore_unknown_fields=True)
        for scope in resource[scopes_key]:
            into = getattr(target, scopes_keys[1]).add()
            items_key = next((k for k in items_keys if isinstance(scope, dict) and k in scope), None)
            if items_key is None or not isinstance(scope[items_key], list):
                json_format.ParseDict(scope, into, ignore_unknown_fields=True)
                continue
            json_format.ParseDict(_without(scope, items_key), into, ignore_unknown_fields=True)
            items = scope[items_key]
            for start in range(0, len(items), _SLICE_ITEMS):
                part = type(into)()
                json_format.ParseDict(
                    {items_key: items[start : start + _SLICE_ITEMS]}, part, ignore_unknown_fields=True
                )
                getattr(into, items_keys[-1]).extend(getattr(part, items_keys[-1]))
                yield


def _without(node: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != key}


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` (decoded JSON) with each lone surrogate in its strings replaced by U+FFFD
    (``json`` joins escaped pairs into one character, so every surrogate left is lone)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    for resource in _list(data, "resourceSpans", "resource_spans"):
        for scope in _list(resource, "scopeSpans", "scope_spans"):
            for span in _list(scope, "spans"):
                _fix_ids(span)
                for link in _list(span, "links"):
                    _fix_ids(link)
    for resource in _list(data, "resourceLogs", "resource_logs"):
        for scope in _list(resource, "scopeLogs", "scope_logs"):
            for record in _list(scope, "logRecords", "log_records"):
                _fix_ids(record)


def _list(node: Any, *keys: str) -> list[Any]:
    if not isinstance(node, dict):
        return []
    for key in keys:
        value = node.get(key)
        if isinstance(value, list):
            return value
    return []


def _fix_ids(node: Any) -> None:
    if not isinstance(node, dict):
        return
    for key in _ID_KEYS:
        snake = {"traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id"}[key]
        for name in (key, snake):
            value = node.get(name)
            if isinstance(value, str):
                node[name] = _hex_to_base64(value)
                if not node[name] and value:
                    _not_base64(key, value)


def _not_base64(key: str, value: str) -> None:
    size = 16 if key == "traceId" else 8
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return
    if len(raw) == size:
        raise InvalidRequest(
            f"{key} {value!r} is base64; OTLP/JSON writes trace and span ids as hex "
            f"({size * 2} hex digits, here {raw.hex()!r}) - use an OTLP/JSON exporter, or send protobuf"
        )


def _hex_to_base64(value: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except (ValueError, binascii.Error):
        return ""  # rejected later as an invalid id, with the rest of the request kept
