"""How harnesses record a tool call on a span: markers, keys and events.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

# A tool span: one of these says so.
TOOL_SPAN_MARKERS: tuple[tuple[str, str | None], ...] = (
    ("gen_ai.operation.name", "execute_tool"),
    ("openinference.span.kind", "TOOL"),
    ("gen_ai.tool.name", None),
    ("tool.name", None),
    ("ai.operationId", "ai.toolCall"),  # Vercel AI SDK 4-6 (and 7's legacy integration)
)
# A span with one of these keys is a hook's around a tool call, never the call itself (Qwen
# Code's qwen-code.hook names the tool and ends in ERROR when no hook is configured).
HOOK_SPAN_KEYS: tuple[str, ...] = ("hook_event",)
# A tool span's name when no attribute names the tool: "execute_tool <tool>" (GenAI semconv).
TOOL_SPAN_NAME_PREFIX = "execute_tool "
# Agent / session-root spans, whose first occurrence anchors session-level results.
AGENT_SPAN_MARKERS: tuple[tuple[str, str | None], ...] = (
    ("gen_ai.operation.name", "invoke_agent"),
    ("openinference.span.kind", "AGENT"),
)
# Attribute prefixes of the GenAI conventions: a span carrying one shows a model or an agent
# at work (a trace that names no session and shows none is a harness's housekeeping).
MODEL_ATTRIBUTE_PREFIXES: tuple[str, ...] = ("gen_ai.", "llm.", "openinference.")
# Where each convention records a tool call: tried in order, first present wins.
TOOL_NAME_KEYS: tuple[str, ...] = ("gen_ai.tool.name", "tool.name", "tool_name", "ai.toolCall.name")
TOOL_CALL_ID_KEYS: tuple[str, ...] = (
    "gen_ai.tool.call.id",
    "tool.id",
    "tool_call_id",
    "tool_use_id",
    "gen_ai.tool.call_id",  # Gemini CLI tool_call span
    "ai.toolCall.id",  # Vercel AI SDK 4-6
    "tool.call_id",  # OpenCode's own Tool.execute span
)
TOOL_ARGUMENT_KEYS: tuple[str, ...] = (
    "gen_ai.tool.call.arguments",  # GenAI semconv, Strands latest
    "input.value",  # OpenInference
    "gen_ai.prompt",  # LangSmith OTel mode
    "gcp.vertex.agent.tool_call_args",  # ADK legacy schema
    "tool_input",
    # Gemini CLI tool_call span (telemetry.traces): the call request {"callId", "name", "args"}
    "gen_ai.input.messages",
    "ai.toolCall.args",  # Vercel AI SDK 4-6
    "tool_arguments",  # Pydantic AI, instrumentation version 2
    "traceloop.entity.input",  # OpenLLMetry's @tool spans: {"args": [...], "kwargs": {...}}
)
# Harnesses that record each argument as its own span attribute: attribute -> argument.
ARGUMENT_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("file_path", "file_path"),  # Claude Code Read
    ("full_command", "command"),  # Claude Code Bash
    ("skill_name", "skill"),  # Claude Code Skill
)
TOOL_RESULT_KEYS: tuple[str, ...] = (
    "gen_ai.tool.call.result",  # GenAI semconv
    "output.value",  # OpenInference
    "gen_ai.completion",  # LangSmith OTel mode
    "gcp.vertex.agent.tool_response",  # ADK legacy schema
    "tool_output",
    # Gemini CLI tool_call span (telemetry.traces): {"status", "request", "response":
    # {"responseParts": [{"functionResponse": {"response": {"output": ...}}}]}}
    "gen_ai.output.messages",
    "ai.toolCall.result",  # Vercel AI SDK 4-6
    "tool_response",  # Pydantic AI, instrumentation version 2
    "traceloop.entity.output",  # OpenLLMetry's @tool spans: the return value as JSON
)
# A tool span by the shape of its keys, where no marker above says so: a key ending in
# ``.tool.name`` under a namespace of the harness's own (``haystack.tool.name``), its
# arguments and result under keys ending as below (``haystack.agent.step.tool.input`` /
# ``.output``), and a flag ending in ``.tool.error`` whose true value says the call failed.
# Or a span kind of the harness's own, a key ending as below whose value is "TOOL" (any case;
# Laminar's ``lmnr.span.type``): the span's name is the tool's, its input and output under
# keys ending in ``.span.input`` / ``.span.output``, its call id under a key ending in
# ``tool_call_id``.
SHAPED_TOOL_NAME_SUFFIX = ".tool.name"
SHAPED_SPAN_KIND_SUFFIXES: tuple[str, ...] = (".span.type", ".span.kind", ".span_kind")
SHAPED_TOOL_KIND = "TOOL"
SHAPED_ARGUMENT_SUFFIXES: tuple[str, ...] = (".tool.input", ".tool.arguments", ".tool.args", ".span.input")
SHAPED_RESULT_SUFFIXES: tuple[str, ...] = (".tool.output", ".tool.result", ".span.output")
SHAPED_ERROR_SUFFIX = ".tool.error"
SHAPED_CALL_ID_SUFFIX = "tool_call_id"
# A tool span's description of its tool (which may list the skills a skill tool loads:
# Haystack's SkillToolset), by key or by a key's ending.
TOOL_DESCRIPTION_KEYS: tuple[str, ...] = ("gen_ai.tool.description", "tool.description")
SHAPED_DESCRIPTION_SUFFIX = ".tool.description"
# Span events that carry arguments / results: (event name, attribute).
TOOL_ARGUMENT_EVENTS: tuple[tuple[str, str], ...] = (("gen_ai.tool.message", "content"),)  # Strands legacy
TOOL_RESULT_EVENTS: tuple[tuple[str, str], ...] = (
    ("gen_ai.choice", "message"),  # Strands legacy
    ("tool.output", "content"),  # Claude Code Read
    ("tool.output", "output"),  # Claude Code Bash
)
# The error class a failed call records (OTel semconv), with or without an ERROR status.
ERROR_TYPE_KEY = "error.type"
# Attributes whose value other than these means the tool failed.
TOOL_STATUS_KEYS: tuple[str, ...] = ("gen_ai.tool.status", "tool.status")
TOOL_SUCCESS_VALUES: frozenset[str] = frozenset({"success", "ok", "completed"})
# Tool spans (by name) whose status is the tool's outcome: ERROR, with the error as its
# message, when the tool failed; OK, set explicitly, when it ran (Kilo Code CLI and OpenCode's
# Effect span ``Tool.execute``, which records neither arguments nor result).  Elsewhere an OK
# status proves nothing (Strands marks a refused load OK).
STATUS_OUTCOME_TOOL_SPANS: frozenset[str] = frozenset({"Tool.execute"})
# A skill tool's error that names the skill asked for, where its arguments are not recorded:
# 'Skill "x" not found. Available skills: a, b' (Kilo Code CLI, OpenCode), "Unknown skill: x"
# (Claude Code, and a tool raising it), and a permission rule's JSON in a refusal
# ('... {"permission":"skill","pattern":"x","action":"deny"}').
SKILL_IN_ERRORS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bSkill\s+(?:\"([^\"]+)\"|'([^']+)')\s+not\s+found"),
    re.compile(r"\bUnknown skill:\s*([^\s.,;<>\"'`]+)", re.IGNORECASE),
    re.compile(r'"permission"\s*:\s*"skill"\s*,\s*"pattern"\s*:\s*"([^"*]+)"'),
)
# The catalog a failed skill call's error lists (what the model is told it may load).
CATALOG_IN_ERRORS: re.Pattern[str] = re.compile(r"\bAvailable skills:[ \t]*([^\n]+)")
CATALOG_IN_ERRORS_SEPARATOR = ","
CATALOG_ERROR_SHAPE = "tool_error"
