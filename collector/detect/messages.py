"""Signal: user requests, final answers and prompt text, wherever a convention keeps them."""

from __future__ import annotations

import re
from typing import Any

from collector.detect.content import flatten_text, parse_json
from collector.otlp.views import SpanView

# (event name or "" for span attributes, attribute key, role the text plays)
PROMPT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("gen_ai.system.message", "content", "system"),  # Strands legacy
    ("gen_ai.user.message", "content", "user"),
    ("gen_ai.assistant.message", "content", "assistant"),
    ("gen_ai.tool.message", "content", "tool"),  # on chat spans: results fed back to the model
    ("gen_ai.choice", "message", "assistant"),
    ("gen_ai.client.inference.operation.details", "gen_ai.system_instructions", "system"),
    ("gen_ai.client.inference.operation.details", "gen_ai.input.messages", "messages"),
    ("", "gen_ai.system_instructions", "system"),  # GenAI semconv
    ("", "gen_ai.input.messages", "messages"),
    ("", "input.value", "messages"),  # OpenInference
    ("", "gen_ai.prompt", "messages"),  # LangSmith OTel mode
    ("", "gcp.vertex.agent.llm_request", "messages"),  # ADK legacy schema
    ("", "user_prompt", "user"),  # Claude Code interaction span (OTEL_LOG_USER_PROMPTS=1)
)
# OpenInference flattens messages: llm.input_messages.<i>.message.content / ...contents.<j>.message_content.text
FLATTENED_PREFIX = "llm.input_messages."
FLATTENED_SUFFIXES = (".message.content", ".message_content.text")
RESPONSE_FIELDS: tuple[tuple[str, str], ...] = (
    ("gen_ai.choice", "message"),
    ("gen_ai.client.inference.operation.details", "gen_ai.output.messages"),
    ("", "gen_ai.output.messages"),
    ("", "output.value"),
    ("", "gen_ai.completion"),
)


def _index(fields: tuple[tuple[str, str, str], ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    events: dict[str, list[tuple[str, str]]] = {}
    for event_name, key, role in fields:
        if event_name:
            events.setdefault(event_name, []).append((key, role))
    return {name: tuple(sorted(keys, key=lambda kr: kr[0])) for name, keys in events.items()}


_PROMPT_ATTRIBUTES = tuple((key, role) for event, key, role in PROMPT_FIELDS if not event)
_PROMPT_EVENTS = _index(PROMPT_FIELDS)
_RESPONSE_ATTRIBUTES = tuple((key, "") for event, key in RESPONSE_FIELDS if not event)
_RESPONSE_EVENTS = _index(tuple((event, key, "") for event, key in RESPONSE_FIELDS))


def _field_texts(
    view: SpanView, attributes: tuple[tuple[str, str], ...], events: dict[str, tuple[tuple[str, str], ...]]
) -> list[tuple[str, str]]:
    """(role, text) of the listed span attributes, then of the listed event attributes
    (events in span order; within an event, its listed keys in key order)."""
    found: list[tuple[str, str]] = []
    attrs = view.attrs
    present = attrs.keys()  # most listed keys are absent: test them against the index first
    for key, role in attributes:
        if key in present:
            text = attrs.text(key)
            if text:
                found.append((role, text))
    if not events:
        return found
    for event in view.events:
        wanted = events.get(event.name)
        if wanted is None:
            continue
        for key, role in wanted:
            text = event.attrs.text(key)
            if text:
                found.append((role, text))
    return found


def prompt_texts(view: SpanView) -> list[tuple[str, str]]:
    """(role, raw text) of every prompt-like field on the span."""
    found = _field_texts(view, _PROMPT_ATTRIBUTES, _PROMPT_EVENTS)
    for key in _flattened_keys(view):
        if key.endswith(FLATTENED_SUFFIXES):
            flattened = view.attrs.text(key)
            if flattened:
                found.append(("flattened", flattened))
    return found


def user_texts(view: SpanView, prompts: list[tuple[str, str]] | None = None) -> list[str]:
    """Every user request the span's recorded input holds, oldest first (histories repeat).
    ``prompts``: the span's ``prompt_texts``, when the caller has them already."""
    found: list[str] = []
    for role, raw in _field_texts(view, _PROMPT_ATTRIBUTES, _PROMPT_EVENTS) if prompts is None else prompts:
        if role == "user":
            parsed = parse_json(raw)
            found.append(_text_only(parsed if parsed is not None else raw))
        elif role == "messages":
            found += [
                _text_only(m.get("parts") if "parts" in m else m.get("content"))
                for m in _messages(raw)
                if m.get("role") in ("user", "human")
            ]
    found += _flattened_user_texts(view)
    return [text.strip() for text in found if text and text.strip()]


def _text_only(value: Any) -> str:
    """The text parts of a message body, leaving out tool calls and tool results."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if value.get("type") not in (None, "text") or "toolResult" in value or "toolUse" in value:
            return ""
        text = value.get("text", value.get("content"))
        return text if isinstance(text, str) else ""
    if isinstance(value, list):
        return "\n".join(t for t in (_text_only(v) for v in value) if t)
    return ""


def _flattened_keys(view: SpanView) -> list[str]:
    """The span's flattened message keys in message and part order (``.2.`` before ``.10.``),
    whatever order the attributes were read in."""
    keys = view.attrs.keys_with_prefix(FLATTENED_PREFIX)
    if len(keys) > 1:
        keys.sort(key=_order)
    return keys


_DIGITS = re.compile(r"(\d+)")
_ORDERS: dict[str, list[int | str]] = {}  # the same few dozen keys recur on every span


def _order(key: str) -> list[int | str]:
    order = _ORDERS.get(key)
    if order is None:
        order = [int(part) if part.isdigit() else part for part in _DIGITS.split(key)]
        if len(_ORDERS) < 4096:
            _ORDERS[key] = order
    return order


def _flattened_user_texts(view: SpanView) -> list[str]:
    keys = _flattened_keys(view)
    if not keys:  # most spans: no OpenInference messages
        return []
    roles: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    for key in keys:
        index = key[len(FLATTENED_PREFIX) :].split(".", 1)[0]
        if key.endswith(".message.role"):
            roles[index] = view.attrs.text(key) or ""
        elif key.endswith(FLATTENED_SUFFIXES):
            texts.setdefault(index, []).append(view.attrs.text(key) or "")
    return [
        "\n".join(texts.get(i, []))
        for i in sorted(roles, key=lambda i: int(i) if i.isdigit() else 0)
        if roles[i] in ("user", "human")
    ]


def response_raw(view: SpanView) -> str | None:
    """The raw text of the span's recorded answer (``answer_text`` reads it)."""
    found = _field_texts(view, _RESPONSE_ATTRIBUTES, _RESPONSE_EVENTS)
    return found[0][1] if found else None


def answer_text(raw: str) -> str | None:
    """The readable answer in a recorded response: the last message of a list, or the text."""
    parsed = parse_json(raw)
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict) and "role" in parsed[0]:
        return flatten_text(parsed[-1].get("parts") or parsed[-1].get("content")) or None
    return (flatten_text(parsed) if parsed is not None else raw) or None


def _messages(raw: str) -> list[dict[str, Any]]:
    parsed = parse_json(raw)
    if isinstance(parsed, dict):
        parsed = parsed.get("messages") or parsed.get("input")
    if isinstance(parsed, list):
        return [m for m in parsed if isinstance(m, dict)]
    return []
