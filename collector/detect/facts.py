"""Facts about how harnesses record skills: everything here is a fact about some harness's
output format (tool names, argument keys, attribute keys, event names, message shapes,
catalog formats, refusal phrases).

The signal modules in this package read these tables and name no harness themselves:
supporting a new harness should mean adding a row here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- spans ------------------------------------------------------------------------------

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

# -- tool calls on spans ----------------------------------------------------------------

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

# -- tool arguments and results, decoded ------------------------------------------------

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

# -- skill tools ------------------------------------------------------------------------

# Native skill tools: tool name -> argument holding the skill name.
SKILL_TOOLS: dict[str, str] = {
    "skills": "skill_name",  # Strands AgentSkills plugin
    "Skill": "skill",  # Claude Code / Claude Agent SDK
    "load_skill": "skill_name",  # Google ADK SkillToolset, OpenAI Agents sandbox
    "activate_skill": "name",  # Gemini CLI
    "invoke_skill": "name",  # OpenHands
    # Vercel bash-tool's experimental_createSkillTool (AI SDK); OpenCode's ``skill`` takes
    # ``name`` (any of SKILL_NAME_KEYS is read where the row's key is absent).
    "skill": "skillName",
    # Pydantic AI (pydantic-ai-harness Skills): each skill a deferred capability; the load
    # returns only a message, the body follows as a system context part (CAPABILITY_SKILL_TAG).
    # A capability that is no skill loads through it too, and is reported as a skill load.
    "load_capability": "id",
}
# ADK prefixes toolset tools (``myset_load_skill``); any ``*_load_skill`` is the same tool.
SKILL_TOOL_SUFFIXES: dict[str, str] = {"_load_skill": "skill_name"}
# Span attributes naming the skill a tool call loads, when its arguments are not recorded.
SKILL_NAME_ATTRIBUTES: tuple[str, ...] = (
    "gen_ai.skill.name",  # proposed GenAI semconv; ADK sets it even for unknown skills
    "skill_name",  # Claude Code
)
# Keys that hold the skill's name when a name arrives as JSON text ('{"name":"pdf-report"}'),
# first present wins.
SKILL_NAME_KEYS: tuple[str, ...] = ("name", "skill", "skill_name", "skillName")
# Namespaced skill names: each part between these is a spec name ("plugin:skill" Claude Code
# plugins, "ns/skill").
SKILL_NAMESPACE_SEPARATORS: re.Pattern[str] = re.compile(r"[:/]")
# Present only when the harness resolved the skill (ADK: absent for an unknown skill).
SKILL_RESOLVED_ATTRIBUTES: tuple[str, ...] = ("gen_ai.skill.source.uri",)
# On a tool span, these say the call loads one of the skill's resources, not the skill: its
# skill attribute then names no load.
SKILL_RESOURCE_ATTRIBUTES: tuple[str, ...] = ("gen_ai.skill.resource.name",)
# A skill tool result shorter than this, on one line, acknowledges a load without the body:
# "Launching skill: x" (Claude Code), "Skill 'x' activated (no instructions available).".
SKILL_ACK_MAX_CHARS = 80
# A longer one-line result acknowledges it too when it names the skill: 'Skill
# "release-notes" loaded successfully. Follow the instructions in the skill context.'
# (Copilot CLI, which hands the body to the model apart from the tool result).
SKILL_NAMED_ACK_MAX_CHARS = 240
# Tools whose result lists the catalog.
CATALOG_TOOLS: frozenset[str] = frozenset({"list_skills", "search_skills"})
# Span attributes holding the catalog's names as a JSON array of strings, recorded even when
# message content is not (Copilot CLI's agent span; no descriptions).
CATALOG_NAME_ATTRIBUTES: tuple[str, ...] = ("github.copilot.context.skills",)
CATALOG_NAMES_SHAPE = "names_attribute"

# -- read tools -------------------------------------------------------------------------

# Tools that read a file, and the arguments that may hold the path.
READ_TOOLS: frozenset[str] = frozenset(
    {"read", "Read", "read_file", "file_read", "filesystem_read", "read_text_file", "view", "cat_file"}
)
PATH_ARGUMENTS: tuple[str, ...] = ("file_path", "path", "filename", "filepath", "file", "filePath")
# An editor tool reads when its command argument says so, whatever the tool's name:
# {"command": "view", "path": ...} (Strands' fileEditor, Anthropic's text editor tool).
READ_COMMAND_ARGUMENT = "command"
READ_COMMANDS: frozenset[str] = frozenset({"view"})

# Any other tool counts as a read when its result holds a SKILL.md, unless its name has one
# of these words (a write or edit echoing what it wrote), compared casefolded.
WRITE_TOOL_WORDS: tuple[str, ...] = (
    "write",
    "edit",
    "create",
    "replace",
    "patch",
    "delete",
    "remove",
    "move",
    "rename",
    "append",
    "insert",
    "save",
    "update",
)

# -- shell tools ------------------------------------------------------------------------

# Shell tools, and the arguments that may hold the command line.
SHELL_TOOLS: frozenset[str] = frozenset(
    {"bash", "Bash", "shell", "command", "exec_command", "execute", "run_shell_command", "terminal", "sh"}
)
COMMAND_ARGUMENTS: tuple[str, ...] = ("command", "cmd", "full_command", "script")
# Verbs that print a file; each maps to flags that make it write instead (sed -i).
READ_VERBS: dict[str, frozenset[str]] = {
    "cat": frozenset(),
    "head": frozenset(),
    "tail": frozenset(),
    "less": frozenset(),
    "more": frozenset(),
    "bat": frozenset(),
    "nl": frozenset(),
    "sed": frozenset({"-i", "--in-place"}),
}
# Shells a command line may run a script in ("bash -lc 'cat x/SKILL.md'", as harnesses that
# pass argv arrays write it): the script after a flag holding "c" is read as a command line.
SHELL_INTERPRETERS: frozenset[str] = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
# Flag prefixes that make a verb write, whatever follows: sed -i.bak joins the backup suffix.
WRITE_FLAG_PREFIXES: dict[str, str] = {"sed": "-i"}
# A shell tool's exit code in its output: "Process exited with code 0" (OpenAI Agents sandbox
# exec_command), "[Command succeeded with exit code 0]" and "exit_code": 0 (Deep Agents).
EXIT_CODE: re.Pattern[str] = re.compile(r"(?:exit(?:ed with)? code|exit_code)\W{0,3}(-?\d+)", re.IGNORECASE)
# How far from the end of the output the exit code is looked for.
EXIT_CODE_TAIL_CHARS = 200
# Exit codes that still mean the read worked: 141 is SIGPIPE from a paged read (cat | head).
OK_EXIT_CODES: frozenset[int] = frozenset({0, 141})

# -- SKILL.md text, however a tool wraps it -----------------------------------------------

# A front matter opening line, as tools print it: bare, after a line-number gutter
# ("     1\t---", "1: ---", "1| ---", "1→---"), or after a label on the same line ("Output: ---",
# Gemini CLI's shell).  The document starts at group "open" (the gutter, if any, is kept: the
# parser strips it from every line).
FRONT_MATTER_LINE: re.Pattern[str] = re.compile(
    r"^[ \t]*(?:[A-Za-z][\w ]{0,30}:[ \t]*)?(?P<open>(?:\d+(?:\t|→|\|[ \t]?|:[ \t]?| {2}))?---)[ \t]*\r?$",
    re.MULTILINE,
)
# How many "---" lines are tried as the opening one (a header may hold a rule of its own).
FRONT_MATTER_TRIES = 3
# An envelope a read tool puts the file in: <file path="...">...</file>, <content>...</content>.
XML_ENVELOPE: re.Pattern[str] = re.compile(
    r"^\s*<([A-Za-z_][\w.-]*)\b[^>\n]*>[ \t]*\r?\n?(.*?)\s*</\1>\s*$", re.DOTALL
)
# Lines a tool appends to what it printed: a truncation marker ("[... truncated ...]",
# "... (output truncated)", "[Output truncated: 120 more lines]"), an exit-code footer.
TRAILER_LINE: re.Pattern[str] = re.compile(
    r"\n[ \t]*(?:\[[^\]\n]*truncated[^\]\n]*\]|\.{3}[^\n]*truncated[^\n]*|\(?(?:output )?truncated\b[^\n]*"
    r"|\[?Process exited with code -?\d+\]?|\[Command (?:succeeded|failed) with exit code -?\d+\]"
    r"|Process Group PGID: \d+)[ \t]*$",  # Gemini CLI's shell
    re.IGNORECASE,
)

# -- outcomes ---------------------------------------------------------------------------

# Whole lines a harness writes when it refuses a load, even under a success status.
REFUSALS: re.Pattern[str] = re.compile(
    r"^\s*(?:"
    r"Error:.*"  # Deep Agents read_file: "Error: File '...' not found"
    r"|Skill\s+(?:'[^']*'|\"[^\"]*\")\s+not\s+found.*"  # Strands AgentSkills ('x'), Mastra ("x"), success status
    r"|Skill\s+'[^']*'\s+is\s+not\s+available.*"  # CrewAI's load_skill, success status
    r"|.*\bunknown skill\b.*"  # Claude Code: "<tool_use_error>Unknown skill: x"
    r"|.*\bno such skill\b.*"
    r"|<tool_use_error>.*"  # Claude Code
    r"|An error occurred while running the tool.*"  # OpenAI Agents SDK's default failure handler
    r"|Rejected\b.*"  # "Rejected by user" (Codex CLI)
    r"|.*\b(?:rejected|denied|blocked) by (?:the )?(?:user|policy|hook|administrator|admin)\b.*"
    r")$",
    re.IGNORECASE | re.MULTILINE,
)
# Words one of which every refusal line holds, casefolded (as IGNORECASE compares): a result
# holding none cannot match, and most results (skill bodies) hold none.
REFUSAL_WORDS: tuple[str, ...] = (
    "error:",
    "found",
    "not available",
    "unknown skill",
    "no such skill",
    "<tool_use_error>",
    "an error occurred while running the tool",
    "rejected",
    " by ",
)
# Refusals and exit codes are looked for before the SKILL.md a result holds (a body may say
# "Error:" or "exit code 1" in its instructions); a result holding none, in its first lines.
REFUSAL_HEAD_LINES = 3
EXIT_CODE_HEAD_CHARS = 200
# Result fields that mark a failure in a JSON tool result ({"error_code": ...}: ADK), and the
# field that holds its message.
ERROR_FIELDS: tuple[str, ...] = ("is_error", "error", "error_code")
ERROR_MESSAGE_FIELD = "error"
# Result fields whose value says how the call went, and where a failed one says why (the
# first non-empty wins).
STATUS_FIELDS: tuple[str, ...] = ("status",)
FAILED_STATUS_VALUES: frozenset[str] = frozenset({"error", "failed", "failure"})
STATUS_MESSAGE_FIELDS: tuple[str, ...] = ("content", "message")
# Keys a JSON result may nest its fields under, one level down: {"data": {...}}, and
# {"output": ..., "metadata": {"exit_code": 1}} (Codex CLI's shell results).
RESULT_WRAPPERS: tuple[str, ...] = ("data", "metadata")
# Result fields holding a shell's exit code.
EXIT_CODE_FIELDS: tuple[str, ...] = ("exit_code", "exitCode")
# A harness's words when a call was not allowed to run (hooks, approvals).
DENIALS: re.Pattern[str] = re.compile(
    r"\b(?:denied|not granted|not approved|rejected|cancel+ed by (?:a )?hook|blocked by"
    r"|a rule which prevents you from using)\b",  # OpenCode's permission deny
    re.IGNORECASE,
)

# -- prompts and answers ---------------------------------------------------------------

# Where a span keeps prompt text: (event name or "" for span attributes, attribute key, role
# the text plays).
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
    ("", "ai.prompt.messages", "messages"),  # Vercel AI SDK 4-6: each model call's messages
    ("", "mastra.model_step.input", "messages"),  # Mastra's OTel exporter: each step's messages
    ("", "user_prompt", "user"),  # Claude Code interaction span (OTEL_LOG_USER_PROMPTS=1)
)
# OpenInference flattens messages into one attribute per field:
# llm.input_messages.<i>.message.content / ...contents.<j>.message_content.text, and .message.role.
FLATTENED_PREFIX = "llm.input_messages."
FLATTENED_SUFFIXES: tuple[str, ...] = (".message.content", ".message_content.text")
FLATTENED_ROLE_SUFFIX = ".message.role"
# Tool calls and results in flattened messages (OpenInference):
# llm.input_messages.<i>.message.tool_calls.<j>.tool_call.{id, function.name, function.arguments},
# and a result as a message of role "tool" with .message.tool_call_id beside its content.
FLATTENED_TOOL_CALLS = ".message.tool_calls."
FLATTENED_CALL_FIELDS: dict[str, str] = {
    "tool_call.id": "id",
    "tool_call.function.name": "name",
    "tool_call.function.arguments": "arguments",
}
FLATTENED_RESULT_ID_SUFFIX = ".message.tool_call_id"
FLATTENED_RESULT_ROLE = "tool"
# The messages a span recorded as its output, flattened the same way; read for skill bodies
# injected into the conversation (OpenInference's Claude Agent SDK instrumentor records the
# CLI's "Base directory for this skill: ..." message there, as llm.output_messages.<i>.
# message.content.<j>).  A key's trailing part number is left out before its suffix is matched.
FLATTENED_OUTPUT_PREFIX = "llm.output_messages."
# A prompt field that is plain text by its mime type holds the user's own words, not a message
# list: OpenInference's input.value with input.mime_type "text/plain" (an AGENT span's request).
PLAIN_TEXT_INPUTS: dict[str, str] = {"input.value": "input.mime_type"}  # field -> its mime-type key
PLAIN_TEXT_MIME = "text/plain"
# Where a span keeps the tools offered to the model, whose descriptions may list the skills
# (Vercel bash-tool's skill tool: "Available skills:" then '- skill("name"): ...'): JSON text,
# or a list of it.  Read for catalogs only; not conversation content.
TOOL_DEFINITION_KEYS: tuple[str, ...] = (
    "gen_ai.tool.definitions",  # GenAI semconv (AI SDK 7)
    "ai.prompt.tools",  # Vercel AI SDK 4-6: one definition a string
)
# Where a span keeps its recorded answer: (event name or "" for span attributes, attribute key).
RESPONSE_FIELDS: tuple[tuple[str, str], ...] = (
    ("gen_ai.choice", "message"),  # Strands legacy
    ("gen_ai.client.inference.operation.details", "gen_ai.output.messages"),
    ("", "gen_ai.output.messages"),  # GenAI semconv
    ("", "output.value"),  # OpenInference
    ("", "gen_ai.completion"),  # LangSmith OTel mode
    ("", "ai.response.text"),  # Vercel AI SDK 4-6
    # ADK legacy schema: {"content": {"role": "model", "parts": [...]}}
    ("", "gcp.vertex.agent.llm_response"),
)
# Message roles of a user request: "human" is LangChain's (Deep Agents, LangGraph).
USER_ROLES: tuple[str, ...] = ("user", "human")
# Context a harness puts before the user's own words in the same message, left out of the
# request: Copilot CLI's "<current_datetime>...</current_datetime>" line, and a label alone
# on the first line that says what follows is the request ("New task:", "Task:", "User
# request:", smolagents' "New task:\n<prompt>").
USER_TEXT_PREAMBLE: re.Pattern[str] = re.compile(
    r"\A\s*(?:<current_datetime>[^<]*</current_datetime>\s*"
    r"|(?:new |the |user(?:'s)? )?(?:task|request|query|question|prompt|user message)[ \t]*:[ \t]*\n\s*(?=\S))",
    re.IGNORECASE,
)
# -- the user's own words (``user_request``): markers of what harnesses inject, as data;
# the rule itself (structured context is removed, prose is kept) is general.
# Tag names a person pastes as markup: a block of these in a request is the user's own text.
USER_MARKUP_TAGS: frozenset[str] = frozenset(
    {
        *("html", "head", "body", "div", "span", "p", "pre", "code", "a", "b", "i", "em", "strong"),
        *("table", "thead", "tbody", "tr", "td", "th", "ul", "ol", "li", "blockquote", "br", "hr"),
        *("svg", "script", "style", "form", "input", "button", "img", "h1", "h2", "h3", "h4", "h5"),
    }
)
# Whole messages a harness writes itself, never the user: OpenCode's (and Kilo's) title
# request, sent as a user message beside the quoted prompt.
HARNESS_MESSAGES: re.Pattern[str] = re.compile(r"Generate a title for this conversation:?")
# A request the harness wrapped whole in double quotes: OpenCode's ``run`` joins its
# arguments, quoting each one that holds a space.
QUOTED_REQUEST: re.Pattern[str] = re.compile(r'\A"([^"]*)"\Z')
# Files a harness expands into the user's message after the words that named them: Gemini
# CLI's @path expansion.
INLINED_FILES_BLOCK: re.Pattern[str] = re.compile(
    r"^-{3} Content from referenced files -{3}$.*?(?:^-{3} End of content -{3}$|\Z)", re.MULTILINE | re.DOTALL
)
# Where a message keeps its body, first present wins: GenAI semconv messages use "parts".
MESSAGE_BODY_KEYS: tuple[str, ...] = ("parts", "content")
# Where a recorded request keeps its message list, first non-empty wins: {"messages": [...]}
# (Anthropic Messages API bodies, LangGraph state), {"input": [...]} (OpenAI Responses API),
# {"contents": [...]} (Gemini API requests: ADK's gcp.vertex.agent.llm_request).
HISTORY_KEYS: tuple[str, ...] = ("messages", "input", "contents")
# Content parts that are text: untyped, or typed "text"; their text, first present wins.
TEXT_PART_TYPES: tuple[str | None, ...] = (None, "text")
TEXT_PART_KEYS: tuple[str, ...] = ("text", "content")
# Untyped content parts that hold a tool call or result rather than text (Strands, the Gemini API).
TOOL_PART_KEYS: tuple[str, ...] = ("toolResult", "toolUse", "functionCall", "functionResponse")

# -- message blocks: tool calls and results inside recorded conversations ----------------


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

# -- injected skill bodies --------------------------------------------------------------

# Skill bodies a harness injects into the conversation without a tool call.
INJECTED_SKILL_MARKER = "<skill "
INJECTED_SKILL_TAG: re.Pattern[str] = re.compile(  # Deep Agents pinned skills
    r'<skill\s+name="([^"]*)"(?:\s+path="([^"]*)")?\s*>(.*?)(?:</skill>|\Z)', re.DOTALL
)
# Claude Code's user message after a Skill call: the skill's folder, then its body.
BASE_DIRECTORY_PREFIX = "Base directory for this skill:"
BASE_DIRECTORY: re.Pattern[str] = re.compile(r"^Base directory for this skill:\s*(\S[^\n]*)\n(.*)", re.DOTALL)
# Gemini CLI's activate_skill result: <activated_skill name="x"> <instructions> the body
# </instructions> <available_resources> ... </activated_skill>.
ACTIVATED_SKILL_MARKER = "<activated_skill "
ACTIVATED_SKILL_TAG: re.Pattern[str] = re.compile(
    r'<activated_skill\s+name="([^"]*)"\s*>\s*<instructions>\s*(.*?)\s*</instructions>', re.DOTALL
)
# Pydantic AI's loaded capability, a skill's: a system part <context id="capability:x"> that
# opens with "# Skill: x" (then "Skill directory: `...`." and the body).
CAPABILITY_SKILL_MARKER = "# Skill: "
CAPABILITY_SKILL_TAG: re.Pattern[str] = re.compile(
    r'<context id="capability:([^"]+)">\s*# Skill: ([^\n]+)\n(.*?)\s*</context>', re.DOTALL
)
# A file the harness put into the user's message, named by the text part just before it:
# "Content from @.gemini/skills/x/SKILL.md:" (Gemini CLI's @path expansion).
INLINED_FILE_MARKER = "Content from @"
INLINED_FILE_HEADER: re.Pattern[str] = re.compile(r"^\s*Content from @(\S+):\s*$")
# Text without these holds no injection.  ``u003cskill`` is ``<skill`` as JSON encoders that
# escape HTML characters (Go's, for one) write it.
INJECTION_MARKERS: tuple[str, ...] = (
    INJECTED_SKILL_MARKER,
    "u003cskill ",
    BASE_DIRECTORY_PREFIX,
    ACTIVATED_SKILL_MARKER,
    INLINED_FILE_MARKER,
    CAPABILITY_SKILL_MARKER,
    'name="',  # any tag naming a skill around its body (``transcript``'s rule by shape)
    'name=\\"',  # the same in JSON text
)

# -- catalogs ---------------------------------------------------------------------------

# The XML catalog (Strands, ADK, the Claude API's skills prompt), XML-escaped:
# <available_skills><skill><name>..</name><description>..</description><location>..</location></skill>
CATALOG_XML_SHAPE = "available_skills_xml"
CATALOG_XML_MARKER = "<available_skills>"
# The marker as it survives in JSON text: encoders that escape HTML characters (Go's, for one)
# write ``<`` as ``\u003c``, so in raw text the XML shape is looked for without its brackets.
CATALOG_XML_RAW_MARKER = "available_skills"
CATALOG_XML_BLOCK: re.Pattern[str] = re.compile(r"<available_skills>(.*?)</available_skills>", re.DOTALL)
CATALOG_XML_SKILL: re.Pattern[str] = re.compile(r"<skill>(.*?)</skill>", re.DOTALL)
# The same block with each skill named in its tag, its description as its text (CrewAI):
# <available_skills>...<skill name="x">description</skill>...</available_skills>
CATALOG_XML_NAMED_SKILL: re.Pattern[str] = re.compile(
    r'<skill\s+name="([^"]*)"[^>]*>(.*?)</skill>', re.DOTALL
)
CATALOG_XML_FIELD: re.Pattern[str] = re.compile(r"<(name|description|location)>(.*?)</\1>", re.DOTALL)
# Markdown catalogs, a "- name: description" list under a lead line (heading or sentence):
# (shape name, cheap substring that must be present, the lead line), tried in this order
# after the XML shape.
CATALOG_MARKDOWN_SHAPES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # OpenAI Agents sandbox, Strands Evals' markdown shape.  "vailable skills" matches the
    # heading in either case ("Available skills", "available skills"), as the lead does.
    (
        "available_skills_markdown",
        "vailable skills",
        # As a line of its own too: "Available skills:" (Vercel bash-tool's skill tool).
        re.compile(r"^(?:#{2,4}\s*)?Available skills:?\s*$", re.IGNORECASE | re.MULTILINE),
    ),
    # Deep Agents "## Skills System" ... "**Available Skills:**"
    (
        "deepagents_skills_system",
        "**Available Skills:**",
        re.compile(r"^\*\*Available Skills:\*\*\s*$", re.MULTILINE),
    ),
    # Pydantic AI's deferred capabilities (pydantic-ai-harness Skills: one a skill)
    (
        "deferred_capabilities",
        "can be loaded using the `load_capability` tool",
        re.compile(
            r"^The following capabilities are deferred and can be loaded using the `load_capability` tool\b.*$",
            re.MULTILINE,
        ),
    ),
    # Claude Code's system reminder
    (
        "claude_skill_tool_list",
        "available for use with the Skill tool",
        re.compile(r"The following skills are available for use with the Skill tool:?"),
    ),
)
# A list item: "- name: description"; the name may be bold (Deep Agents), in backticks, or
# the argument of the call that loads it ('- skill("name"): ...', Vercel bash-tool).
CATALOG_ITEM: re.Pattern[str] = re.compile(
    r"^[-*]\s+(?:\w+\(\")?\**`?([A-Za-z0-9][\w.-]*)`?\**(?:\"\))?\s*:\s*(.*)$"
)
# A suffix naming the skill's folder, not part of the description: " (file: .agents/csv-cleanup)"
# (OpenAI Agents sandbox).
CATALOG_FILE_SUFFIX: re.Pattern[str] = re.compile(r"\s*\((?:file|path|location):[^)]*\)\s*$")
# The sentence a markdown catalog shows instead of items when it lists no skill.
CATALOG_EMPTY: re.Pattern[str] = re.compile(r"no skills (?:are )?(?:currently )?available", re.IGNORECASE)

# -- log records ------------------------------------------------------------------------

# Claude Code names its events "claude_code.<event>" in OTLP's event_name field and bare in
# ``event.name``; the tables below use the bare names.
LOG_EVENT_PREFIX = "claude_code."
# GenAI semconv message events (1.28-1.36; OpenLLMetry's and the contrib instrumentations'
# event mode): one message in the record's body, {"content": ..., "tool_calls": [...]}, or for
# a choice {"index", "message": {...}, "finish_reason"}; by event name -> the message's role.
LOG_MESSAGE_EVENTS: dict[str, str] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "answer",
}
LOG_CHOICE_MESSAGE_KEY = "message"
LOG_MESSAGE_CALLS_KEY = "tool_calls"  # an assistant message's calls, beside its content
# Log records (OTLP logs, by event name) that carry skill evidence.  Names without
# LOG_EVENT_PREFIX are looked up as they are ("codex.skill_invocation").
LOG_SKILL_ACTIVATED: dict[str, str] = {
    "skill_activated": "skill.name",  # Claude Code
    # Codex CLI: a "$name" mention (skill.invocation_type=explicit) or a shell command that
    # reads a listed SKILL.md (implicit; logged before the exec policy runs, so also for a
    # refused read).
    "codex.skill_invocation": "skill.name",
    "qwen-code.skill_launch": "skill_name",  # Qwen Code, with success
}
# Span events (by name) recording a skill's activation, as (the attribute naming the skill,
# the attribute holding its body when content is recorded): Copilot CLI puts one on its
# agent span for each load its skill tool made, with or without message content.
SPAN_EVENT_SKILL_ACTIVATED: dict[str, tuple[str, str]] = {
    "github.copilot.skill.invoked": ("gen_ai.skill.name", "github.copilot.skill.content"),
}
# On an activation record, a false value here says the skill did not load.
LOG_SKILL_SUCCESS_KEYS: tuple[str, ...] = ("success",)
# What a harness writes in place of a skill's name it was told not to record: no name.
# Claude Code without OTEL_LOG_TOOL_DETAILS names every project or user skill "custom_skill".
REDACTED_SKILL_NAMES: frozenset[str] = frozenset({"custom_skill"})
# Log records of a model request that name the skill the request ran under (Claude Code's
# api_request carries skill.name after an activation, even where the activation's own name
# is redacted): they name a load whose own record left its name out.
LOG_ACTIVE_SKILL: dict[str, str] = {"api_request": "skill.name"}
LOG_TOOL_RESULTS: dict[str, tuple[str, str]] = {"tool_result": ("tool_use_id", "success")}  # Claude Code


@dataclass(frozen=True, slots=True)
class LogCallFields:
    """Where a log record reporting one tool call keeps its parts (attribute keys; None where
    the harness records no such part)."""

    name: str
    success: str  # true / false, as a bool or its text
    arguments: str | None = None  # the call's arguments, as JSON text
    call_id: str | None = None
    result: str | None = None  # what the tool returned: the record is the whole call
    error: str | None = None  # the harness's words when the call failed or was refused


# Log records (by event name) that report a tool call: beside a tool span that lacks its
# arguments or error, or instead of one (logs-only telemetry; a call refused before it ran).
LOG_TOOL_CALLS: dict[str, LogCallFields] = {
    "gemini_cli.tool_call": LogCallFields(  # Gemini CLI
        "function_name", "success", arguments="function_args", error="error"
    ),
    "qwen-code.tool_call": LogCallFields(  # Qwen Code (a Gemini CLI fork), with the call id
        "function_name", "success", arguments="function_args", call_id="call_id", error="error"
    ),
    # Codex CLI; success="true" says the tool ran (not the command's exit code, which is in
    # the output's "Process exited with code N" header).
    "codex.tool_result": LogCallFields(
        "tool_name", "success", arguments="arguments", call_id="call_id", result="output"
    ),
}


@dataclass(frozen=True, slots=True)
class PermissionCheckFields:
    """Where a logged permission check keeps its parts, in the fields of a log body written as
    ``[message, "<JSON object>"]`` (``LogView.message_fields``)."""

    message: str  # the body's message
    tool: str  # the permission checked: the tool's name
    pattern: str  # what the call asked for (a skill's name, a path, a command)
    rule: str  # the rule that decided: an object holding ``verdict``
    verdict: str
    refused: str  # ``verdict``'s value when the rule refused the call (not when it asks the user)


# A tool call's permission check, logged inside the tool span it guards (its record's span is
# a descendant of the tool span, so it falls within the tool span's time): Kilo Code CLI and
# OpenCode's Effect logger, ["evaluated", {"permission": "skill", "pattern": "release-notes",
# "action": {..., "action": "allow"}}].  The pattern stands for one argument of the tool.
PERMISSION_CHECK = PermissionCheckFields("evaluated", "permission", "pattern", "action", "action", "deny")
PERMISSION_ARGUMENTS: dict[str, str] = {"skill": "name", "read": "filePath", "bash": "command"}
# Tools checked part by part: a command line is checked command by command ("head -n 5 x",
# "cat SKILL.md", "head -n 80"), the parts joined back as one line (its pipes and && lost).
PERMISSION_JOINERS: dict[str, str] = {"bash": "; "}

# Log records holding a user's request, or the agent's final answer, as plain text: event
# name -> attribute.
LOG_USER_PROMPTS: dict[str, str] = {
    "codex.user_prompt": "prompt",  # Codex CLI
    "gemini_cli.user_prompt": "prompt",  # Gemini CLI (telemetry.logPrompts, on by default)
    "qwen-code.user_prompt": "prompt",  # Qwen Code (telemetry.logPrompts)
}
LOG_AGENT_RESPONSES: dict[str, str] = {
    "codex.agent_response": "response",  # Codex CLI, log_agent_responses
    "assistant_response": "response",  # Claude Code's claude_code.assistant_response (2.1.327, 2.1.332)
}
# What a harness writes in place of content it was told not to record: no content at all.
# "[REDACTED]": Codex CLI's prompts without log_user_prompt, and Strands' messages, system
# prompts and tool arguments and results under gen_ai_unredacted_attributes; "__REDACTED__":
# OpenInference's OPENINFERENCE_HIDE_INPUTS / _OUTPUTS / _INPUT_MESSAGES ...; "<REDACTED>":
# Claude Code's prompts and replies without OTEL_LOG_USER_PROMPTS.
REDACTED_VALUES: frozenset[str] = frozenset({"[REDACTED]", "__REDACTED__", "<REDACTED>"})
# What a harness records in place of a request: no request to read.  Redacted text, and
# CrewAI's execute crew span records a crew run without inputs as a user message "null".
PLACEHOLDER_PROMPTS: frozenset[str] = REDACTED_VALUES | {"null"}
# What a span or log records as its output that is no answer: redacted text; LangGraph's
# routing steps output the next node's name, the last one "__end__", and a step that returns
# nothing "null" (OpenInference CHAIN spans).
PLACEHOLDER_ANSWERS: frozenset[str] = REDACTED_VALUES | {"__end__", "null"}
# Log record attributes that hold whole API requests / responses or prompts.
LOG_CONTENT_ATTRIBUTES: tuple[str, ...] = (
    "body",  # Claude Code api_request_body / api_response_body (OTEL_LOG_RAW_API_BODIES)
    "prompt",  # Claude Code user_prompt
    "gen_ai.input.messages",  # GenAI semconv
    "gen_ai.output.messages",
    "request_text",  # Gemini CLI api_request: the whole contents history, as JSON
    "response_text",  # Gemini CLI api_response: the GenerateContentResponse JSON
)

# -- instrumentation scopes -------------------------------------------------------------

# Instrumentation scope -> framework, by prefix.
FRAMEWORK_SCOPES: tuple[tuple[str, str], ...] = (
    ("strands.telemetry", "strands"),
    ("strands-agents", "strands"),  # Strands for TypeScript (its tracer's default name)
    ("openinference.instrumentation.langchain", "langgraph"),
    ("@arizeai/openinference-instrumentation-langchain", "langgraph"),  # LangChain.js (Deep Agents JS)
    ("opentelemetry.instrumentation.langchain", "langgraph"),
    ("langsmith", "langgraph"),
    ("openinference.instrumentation.google_adk", "google_adk"),
    ("gcp.vertex.agent", "google_adk"),
    ("google.adk", "google_adk"),
    ("openinference.instrumentation.openai_agents", "openai_agents"),
    ("opentelemetry.instrumentation.openai_agents", "openai_agents"),
    ("openinference.instrumentation.claude_agent_sdk", "claude_agent_sdk"),
    ("com.anthropic.claude_code", "claude_code"),
    ("gemini-cli", "gemini_cli"),  # Gemini CLI: spans and logs alike
    ("codex_otel", "codex_cli"),  # Codex CLI log scopes: codex_otel.log_only, codex_otel.trace_safe
    ("codex_exec", "codex_cli"),  # Codex CLI span scope under `codex exec`
    ("codex", "codex_cli"),
    ("opencode", "opencode"),  # OpenCode: its own spans, the AI SDK's ai.* spans and its logs
    ("qwen-code", "qwen_code"),  # Qwen Code: spans and logs alike
    ("pydantic-ai", "pydantic_ai"),  # Pydantic AI's instrumentation (Agent.instrument_all)
    ("agent_framework", "agent_framework"),  # Microsoft Agent Framework (Python)
    ("crewai", "crewai"),  # CrewAI's own tracing (crewai.telemetry.tracing)
    ("@mastra/", "mastra"),  # Mastra's OpenTelemetry exporter (@mastra/otel-exporter)
    ("openinference.instrumentation.llama_index", "llamaindex"),
    ("github.copilot", "copilot_cli"),  # GitHub Copilot CLI's own spans
    ("traceloop.", "openllmetry"),  # OpenLLMetry's decorators (@agent, @tool) on a hand-written agent
    ("opentelemetry.instrumentation.anthropic", "openllmetry"),  # OpenLLMetry's Anthropic SDK instrumentation
    ("opentelemetry.util.genai", "otel_genai"),  # the OpenTelemetry contrib GenAI instrumentations
    ("opentelemetry.instrumentation.llamaindex", "llamaindex"),
)

# Instrumentation scope -> framework, whole names too short to be prefixes.
FRAMEWORK_SCOPE_NAMES: dict[str, str] = {
    "ai": "ai_sdk",  # Vercel AI SDK 4-6, and 7's legacy integration
    "gen_ai": "ai_sdk",  # Vercel AI SDK 7's OpenTelemetry integration (@ai-sdk/otel)
}

# What an instrumentation library puts before the name of what it instruments: for a scope
# no row names, the framework is the part after it (``frameworks.by_shape``).
INSTRUMENTATION_PREFIXES: tuple[str, ...] = (
    "openinference.instrumentation.",
    "opentelemetry.instrumentation.",
    "@arizeai/openinference-instrumentation-",
    "@opentelemetry/instrumentation-",
    "io.opentelemetry.",
    "opentelemetry-instrumentation-",
)

# Span name -> framework, for a harness whose spans come under an observability SDK's scope
# that many harnesses share (Laminar's ``lmnr.tracer``) and whose service name is the
# application's: the harness's own traced method.  OpenHands SDK's Conversation.send_message
# (the generic rules name such a session ``lmnr``, after the scope).
FRAMEWORK_SPAN_NAMES: dict[str, str] = {"conversation.send_message": "openhands"}

# Resource ``service.name`` -> framework, by prefix, when no scope names one.
SERVICE_NAME_KEY = "service.name"
FRAMEWORK_SERVICES: tuple[tuple[str, str], ...] = (
    ("gemini-cli", "gemini_cli"),
    ("gemini_cli", "gemini_cli"),
    ("codex", "codex_cli"),  # codex_cli_rs, codex_exec, codex-cli
    ("claude-code", "claude_code"),
    ("opencode", "opencode"),
    ("qwen-code", "qwen_code"),
    ("github-copilot", "copilot_cli"),
)
# Attributes outside the tables above that may hold prompt text (a system instruction, a
# request) in a harness no row knows: a key holding one of these words, compared casefolded.
PROMPT_KEY_WORDS: tuple[str, ...] = (
    "system",
    "instruction",
    "prompt",
    "request_text",
    "request_body",
    "messages",
    "contents",
)
# Attributes outside the tables above that hold an operation's input in a harness's own
# namespace (``haystack.agent.input``, ``haystack.pipeline.input_data``): by the key's last
# part.  A message list in one (at its top, under a history key, or under one component's
# name) holds the user's requests; any of them may hold a catalog.
INPUT_KEY_ENDINGS: tuple[str, ...] = (".input", ".input_data")
# Prefixes of keys another reader takes already (OpenInference's flattened messages).
PROMPT_KEY_SKIP_PREFIXES: tuple[str, ...] = (FLATTENED_PREFIX, "llm.output_messages.")
# Shorter text holds no catalog or history worth reading (a model name, a count).
PROMPT_MIN_CHARS = 64

# -- sessions ---------------------------------------------------------------------------

# Where harnesses put the id of the run a span belongs to (``sessions.keys``' default), in
# precedence order: where the item is ("span" covers log records too) and the attribute.
SESSION_KEYS: tuple[str, ...] = (
    "span:session.id",  # OpenTelemetry semconv; Strands, OpenInference, Claude Code, Gemini CLI
    "span:gen_ai.conversation.id",  # GenAI semconv; ADK agent and LLM spans
    "span:conversation.id",  # Codex CLI: on its log records (and the spans that carry it)
    "span:langsmith.metadata.session_id",  # LangSmith OTel mode flattens run metadata
    "span:ai.telemetry.metadata.sessionId",  # Vercel AI SDK 4-6: experimental_telemetry.metadata
    "span:thread_id",  # Codex CLI trace exporter: the conversation id on its session-loop spans
    "span:thread.id",  # Codex CLI: the conversation id as text (its integer values name none)
    "span:traceloop.association.properties.session_id",  # OpenLLMetry's association properties
    "resource:session.id",
    "resource:gen_ai.conversation.id",
)
