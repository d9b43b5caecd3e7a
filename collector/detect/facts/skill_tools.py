"""How harnesses name skill tools, their arguments and acknowledgements.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

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
