"""Facts about how harnesses record skills.  Everything here describes someone's output.

The detectors in this package read these tables and contain no harness names of their own:
supporting a new harness should mean adding a row here.
"""

from __future__ import annotations

import re

# Native skill tools: tool name -> argument holding the skill name.
SKILL_TOOLS: dict[str, str] = {
    "skills": "skill_name",  # Strands AgentSkills plugin
    "Skill": "skill",  # Claude Code / Claude Agent SDK
    "load_skill": "skill_name",  # Google ADK SkillToolset, OpenAI Agents sandbox
    "activate_skill": "name",  # Gemini CLI
    "invoke_skill": "name",  # OpenHands
}
# ADK prefixes toolset tools (``myset_load_skill``); any ``*_load_skill`` is the same tool.
SKILL_TOOL_SUFFIXES: dict[str, str] = {"_load_skill": "skill_name"}

# Tools that read a file: tool name -> arguments that may hold the path.
READ_TOOLS: frozenset[str] = frozenset(
    {"read", "Read", "read_file", "file_read", "filesystem_read", "read_text_file", "view", "cat_file"}
)
PATH_ARGUMENTS: tuple[str, ...] = ("file_path", "path", "filename", "filepath", "file")

# Where each convention records a tool call: tried in order, first present wins.
TOOL_NAME_KEYS: tuple[str, ...] = ("gen_ai.tool.name", "tool.name", "tool_name")
TOOL_CALL_ID_KEYS: tuple[str, ...] = ("gen_ai.tool.call.id", "tool.id", "tool_call_id", "tool_use_id")
TOOL_ARGUMENT_KEYS: tuple[str, ...] = (
    "gen_ai.tool.call.arguments",  # GenAI semconv, Strands latest
    "input.value",  # OpenInference
    "gen_ai.prompt",  # LangSmith OTel mode
    "tool_input",
)
TOOL_RESULT_KEYS: tuple[str, ...] = (
    "gen_ai.tool.call.result",
    "output.value",
    "gen_ai.completion",
    "tool_output",
)
# Span events that carry arguments / results: (event name, attribute).
TOOL_ARGUMENT_EVENTS: tuple[tuple[str, str], ...] = (("gen_ai.tool.message", "content"),)  # Strands legacy
TOOL_RESULT_EVENTS: tuple[tuple[str, str], ...] = (
    ("gen_ai.choice", "message"),  # Strands legacy
    ("tool.output", "output"),  # Claude Code
)
# Attributes whose value other than these means the tool failed.
TOOL_STATUS_KEYS: tuple[str, ...] = ("gen_ai.tool.status", "tool.status")
TOOL_SUCCESS_VALUES: frozenset[str] = frozenset({"success", "ok", "completed"})

# A tool span: one of these says so.
TOOL_SPAN_MARKERS: tuple[tuple[str, str | None], ...] = (
    ("gen_ai.operation.name", "execute_tool"),
    ("openinference.span.kind", "TOOL"),
    ("gen_ai.tool.name", None),
    ("tool.name", None),
)

# Agent / session-root spans, whose first occurrence anchors session-level results.
AGENT_SPAN_MARKERS: tuple[tuple[str, str | None], ...] = (
    ("gen_ai.operation.name", "invoke_agent"),
    ("openinference.span.kind", "AGENT"),
)

# Whole lines a harness writes when it refuses a load, even under a success status.
REFUSALS: re.Pattern[str] = re.compile(
    r"^\s*(?:"
    r"Error:.*"
    r"|Skill\s+'[^']*'\s+not\s+found.*"
    r"|.*\bunknown skill\b.*"
    r"|.*\bno such skill\b.*"
    r"|<tool_use_error>.*"
    r"|An error occurred while running the tool.*"
    r")$",
    re.IGNORECASE | re.MULTILINE,
)

# Result fields that mark a failure in a JSON tool result.
ERROR_FIELDS: tuple[str, ...] = ("is_error", "error", "error_code")

# Instrumentation scope -> framework, by prefix.
FRAMEWORK_SCOPES: tuple[tuple[str, str], ...] = (
    ("strands.telemetry", "strands"),
    ("openinference.instrumentation.langchain", "langgraph"),
    ("opentelemetry.instrumentation.langchain", "langgraph"),
    ("langsmith", "langgraph"),
    ("openinference.instrumentation.google_adk", "google_adk"),
    ("gcp.vertex.agent", "google_adk"),
    ("google.adk", "google_adk"),
    ("openinference.instrumentation.openai_agents", "openai_agents"),
    ("opentelemetry.instrumentation.openai_agents", "openai_agents"),
    ("openinference.instrumentation.claude_agent_sdk", "claude_agent_sdk"),
    ("com.anthropic.claude_code", "claude_code"),
    ("openinference.instrumentation.llama_index", "llamaindex"),
    ("opentelemetry.instrumentation.llamaindex", "llamaindex"),
)
