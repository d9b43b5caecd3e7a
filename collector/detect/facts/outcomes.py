"""How harnesses say a call failed or was refused.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

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
