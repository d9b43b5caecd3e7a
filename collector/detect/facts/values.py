"""How a tool call's decoded arguments and results wrap their text.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

# Keys that wrap a call's arguments, the first non-empty one wins: {"args": [...], "kwargs":
# {...}} (OpenInference keyword arguments), {"input": ...} (LangSmith OTel mode), {"callId",
# "name", "args": {...}} (Gemini CLI's call request; a positional list is no dict and is skipped).
ARGUMENT_WRAPPERS: tuple[str, ...] = ("kwargs", "input", "args")
# Keys that hold the readable text of a recorded message or result: text parts and message
# content, tool outputs ("output", "result"), the OpenAI Responses API's "instructions", GenAI
# semconv tool_call_response "response" and message "parts", "data" wrappers, and the Gemini
# API's function responses as Gemini CLI records a tool's outcome ("responseParts" holding
# {"functionResponse": {"response": {"output": ...}}}).
TEXT_FIELDS: tuple[str, ...] = (
    "text",
    "content",
    "output",
    "result",
    "instructions",
    "response",
    "parts",
    "data",
    "responseParts",
    "functionResponse",
    "stdout",  # {"stdout", "stderr", "exitCode"}: Vercel bash-tool's bash (AI SDK)
    "value",  # a Vercel AI SDK tool-result's output: {"type": "json" | "text", "value": ...}
    "file",  # Claude Code's Read result as its hooks see it: {"type": "text", "file": {"content": ...}}
    "json",  # Strands TS: a tool result's JSON part, [{"json": {"output": ..., "exit_code": 0}}]
    # LangChain JS's serialised objects, as OpenInference records a ToolMessage:
    # {"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs": {"content": ...}}
    "kwargs",
    "generations",  # LangChain's LLMResult (an LLM span's output.value): {"generations": [[{"text": ...}]]}
    # LlamaIndex's ToolOutput as OpenInference records a tool's output.value:
    # {"blocks": [{"text": ...}], "tool_name": ..., "raw_input": ..., "raw_output": ..., "is_error": false}
    "blocks",
)
# What a tool span records as both its arguments and its result when its harness captures no
# content: ADK for TypeScript writes "{}" for both (ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false).
# Such a call recorded neither; a call with no arguments still records its result.
UNRECORDED_CALL = "{}"
