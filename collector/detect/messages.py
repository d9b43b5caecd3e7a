"""Signal: user requests, final answers and prompt text, wherever a convention keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collector.detect.content import flatten_text, parse_json
from collector.spans import SpanView, as_text, value_of

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


def _values(view: SpanView, fields: tuple[tuple[str, str], ...]) -> Iterator[str]:
    for event_name, key in fields:
        if not event_name:
            text = view.attrs.text(key) if key in view.attrs else None
            if text:
                yield text
            continue
        for event in view.span.events:
            if event.name == event_name:
                for kv in event.attributes:
                    if kv.key == key:
                        text = as_text(value_of(kv.value))
                        if text:
                            yield text


def prompt_texts(view: SpanView) -> Iterator[tuple[str, str]]:
    """(role, raw text) of every prompt-like field on the span."""
    for event_name, key, role in PROMPT_FIELDS:
        for text in _values(view, ((event_name, key),)):
            yield role, text
    for key in view.attrs.keys():  # noqa: SIM118 - Attributes is not a dict
        if key.startswith(FLATTENED_PREFIX) and key.endswith(FLATTENED_SUFFIXES):
            flattened = view.attrs.text(key)
            if flattened:
                yield "flattened", flattened


def user_message(view: SpanView) -> str | None:
    """The last user request an agent span records."""
    found = None
    for role, raw in prompt_texts(view):
        if role == "user":
            found = flatten_text(parse_json(raw) if parse_json(raw) is not None else raw)
        elif role == "messages":
            for message in _messages(raw):
                if message.get("role") in ("user", "human"):
                    found = flatten_text(message.get("parts") or message.get("content"))
    return found or None


def response(view: SpanView) -> str | None:
    for raw in _values(view, RESPONSE_FIELDS):
        parsed = parse_json(raw)
        if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict) and "role" in parsed[0]:
            return flatten_text(parsed[-1].get("parts") or parsed[-1].get("content")) or None
        return flatten_text(parsed) if parsed is not None else raw
    return None


def _messages(raw: str) -> list[dict[str, Any]]:
    parsed = parse_json(raw)
    if isinstance(parsed, dict):
        parsed = parsed.get("messages") or parsed.get("input")
    if isinstance(parsed, list):
        return [m for m in parsed if isinstance(m, dict)]
    return []
