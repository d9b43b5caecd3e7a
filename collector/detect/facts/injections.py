"""How harnesses inject a skill's body into the conversation without a tool call.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

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
