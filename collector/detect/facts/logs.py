"""How harnesses report skills, tool calls and prompts in log records.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

from dataclasses import dataclass

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
