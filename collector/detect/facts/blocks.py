"""How recorded conversations hold tool calls and results as message blocks.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CallFields:
    """Where a message block keeps a tool call's parts."""

    id: str
    name: str
    arguments: str
    within: str = ""  # the name and arguments sit in this key's dict, the id beside it
    json_arguments: bool = False  # the arguments are JSON text, decoded when they parse
    other_arguments: str = ""  # where the arguments are when ``arguments`` is absent


@dataclass(frozen=True, slots=True)
class ResultFields:
    """Where a message block keeps a tool result's parts."""

    id: str
    text: str
    error: str = ""  # the key that says the call failed; "": the format does not say
    error_value: str = ""  # the value of ``error`` that means failed; "": any truthy value
    name: str = ""  # the key naming the tool, for formats whose results carry no call id


# Blocks a dict holds under one key, the block being that key's dict: (key, fields), in order.
# Strands: {"toolUse": {...}}, {"toolResult": {...}}.
KEYED_BLOCKS: tuple[tuple[str, CallFields | ResultFields], ...] = (
    ("toolUse", CallFields("toolUseId", "name", "input")),
    ("toolResult", ResultFields("toolUseId", "content", error="status", error_value="error")),
    # Gemini API parts, camelCase as the REST API writes them and snake_case as the Python
    # SDK does; the id is often absent (results then pair with calls by tool name).
    ("functionCall", CallFields("id", "name", "args")),
    ("functionResponse", ResultFields("id", "response", name="name")),
    ("function_call", CallFields("id", "name", "args")),
    ("function_response", ResultFields("id", "response", name="name")),
)
# Blocks a dict is by its "type" value.
BLOCK_TYPE_KEY = "type"
TYPED_BLOCKS: dict[str, CallFields | ResultFields] = {
    "tool_use": CallFields("id", "name", "input"),  # Anthropic Messages API
    "tool_result": ResultFields("tool_use_id", "content", error="is_error"),  # Anthropic Messages API
    # GenAI semconv parts; LangChain's tool_calls[] entries keep the arguments in "args"
    "tool_call": CallFields("id", "name", "arguments", other_arguments="args"),
    # LangChain tool messages: {"type": "tool", "tool_call_id", "content", "status"}
    "tool": ResultFields("tool_call_id", "content", error="status", error_value="error", name="name"),
    "tool_call_response": ResultFields("id", "response"),  # GenAI semconv parts
    # OpenAI Responses API input items (Codex CLI's histories)
    "function_call": CallFields("call_id", "name", "arguments", json_arguments=True),
    "function_call_output": ResultFields("call_id", "output"),
    "custom_tool_call": CallFields("call_id", "name", "input"),
    "custom_tool_call_output": ResultFields("call_id", "output"),
    # Vercel AI SDK messages: the arguments in "input" (5+) or "args" (4), the result in
    # "output" ({"type": "json" | "text", "value": ...}, 5+) or "result" (4)
    "tool-call": CallFields("toolCallId", "toolName", "input", other_arguments="args"),
    "tool-result": ResultFields("toolCallId", "output", name="toolName"),
}
# Blocks a dict is when its id key is present and one key holds a value (None: any dict):
# (key, value, fields), tried in order after the two tables above.
TAGGED_BLOCKS: tuple[tuple[str, str | None, CallFields | ResultFields], ...] = (
    ("role", "tool", ResultFields("tool_call_id", "content")),  # OpenAI chat: a role "tool" message
    # OpenAI chat: a tool_calls[] entry, {"id", "function": {"name", "arguments"}}, the
    # arguments JSON text (the API) or an object (some instrumentations)
    ("function", None, CallFields("id", "name", "arguments", within="function", json_arguments=True)),
)
# Every block above needs one of these words in the text (a key, a type value, an id key), so
# text without any of them holds no block and is not walked ("function" covers functionCall,
# function_call_output ...).
BLOCK_MARKERS: tuple[str, ...] = (
    "toolUse",
    "toolResult",
    "tool_use",
    "tool_result",
    "tool_call",
    "function",
    "custom_tool_call",
    "tool-call",
    "tool-result",
)
# Calls in histories kept for detection besides skill tools: those whose arguments name a
# file ending in this (reads by any tool, shell reads), as a cheap test before detection.
HISTORY_CALL_MARKER = "SKILL.md"
