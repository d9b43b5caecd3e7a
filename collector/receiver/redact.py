"""Redaction of configured attribute keys, applied to each request before it is spooled.

Done once, at the door, so a redacted value never reaches the spool, the detectors, the
judge's prompts, the status API or the exported evaluation spans.  Two passes over the
decoded OTLP request:

1. every attribute whose key matches (resource, scope, span, event, link and log record
   attributes, lists or maps as ``collector.otlp.classes`` parses them, and maps nested
   inside values) gets the value ``[REDACTED]``;
2. the string values removed in pass 1 (4 characters or longer) are also replaced wherever
   else they occur in the same request: a user's e-mail copied into a prompt is caught.

Values seen only in other requests are not known here; redact the attribute that carries
the text (e.g. the prompt) when it must never leave the agent's side.
"""

from __future__ import annotations

from dataclasses import replace

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from collector.otlp.received import Received
from collector.receiver.config import Redact
from collector.receiver.types import Intake

REDACTED = "[REDACTED]"
_KEY_VALUE = KeyValue.DESCRIPTOR.full_name  # ours (``collector.otlp.classes``) is a copy: by name
MIN_SCRUB_CHARS = 4  # shorter values ("1", "eu") would shred unrelated text


def _is_map(field: FieldDescriptor) -> bool:
    """A map field: attributes as ``collector.otlp.classes`` parses them (key -> AnyValue)."""
    return field.type == FieldDescriptor.TYPE_MESSAGE and bool(field.message_type.GetOptions().map_entry)


def _repeated(field: FieldDescriptor) -> bool:
    # ``is_repeated`` since protobuf 5.28/6; ``label`` before it (removed in 7).
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else bool(field.label == FieldDescriptor.LABEL_REPEATED)


class Redactor:
    def __init__(self, config: Redact) -> None:
        self._config = config

    def __call__(self, request: Message) -> int:
        """Redact ``request`` in place; returns how many attribute values were replaced."""
        removed: list[str] = []
        count = self._keys(request, removed)
        values = sorted({v for v in removed if len(v) >= MIN_SCRUB_CHARS and v != REDACTED}, key=len)
        if values:
            _scrub(request, values[::-1])  # longest first: a value inside another goes second
        return count

    def _keys(self, message: Message, removed: list[str]) -> int:
        if message.DESCRIPTOR.full_name == _KEY_VALUE and self._config.matches(message.key):
            _strings(message.value, removed)
            message.value.Clear()
            message.value.string_value = REDACTED
            return 1
        count = 0
        for field, value in message.ListFields():
            if field.type != FieldDescriptor.TYPE_MESSAGE:
                continue
            if _is_map(field):  # attributes: each value under its key
                for key in list(value):
                    if self._config.matches(key):
                        _strings(value[key], removed)
                        value[key].Clear()
                        value[key].string_value = REDACTED
                        count += 1
                    else:
                        count += self._keys(value[key], removed)
                continue
            for child in value if _repeated(field) else (value,):
                count += self._keys(child, removed)
        return count


def _strings(message: Message, into: list[str]) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            into.extend(value if _repeated(field) else (value,))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for child in value if _repeated(field) else (value,):
                _strings(child, into)


def _scrub(message: Message, values: list[str]) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if _repeated(field):
                value[:] = [_replace(v, values) for v in value]
            elif any(v in value for v in values):
                setattr(message, field.name, _replace(value, values))
        elif _is_map(field):  # attributes: keys and values, as a list of them would be
            for key in list(value):
                _scrub(value[key], values)
                renamed = _replace(key, values)
                if renamed != key:
                    value[renamed].CopyFrom(value[key])
                    del value[key]
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for child in value if _repeated(field) else (value,):
                _scrub(child, values)


def _replace(text: str, values: list[str]) -> str:
    for value in values:
        text = text.replace(value, REDACTED)
    return text


class Redacting:
    """A stage before ``next`` that redacts each request (see the module doc)."""

    def __init__(self, config: Redact, next: Intake) -> None:
        self._redactor = Redactor(config)
        self.next = next

    async def consume(self, item: Received) -> None:
        if self._redactor(item.request):
            item = replace(item, raw=None)  # the bytes as received still hold the values
        await self.next.consume(item)

    async def shutdown(self, timeout: float) -> None:
        await self.next.shutdown(timeout)


def redacting(next: Intake, config: Redact) -> Intake:
    """``next`` behind redaction; ``next`` itself when nothing is to be redacted."""
    return Redacting(config, next) if config.attributes else next
