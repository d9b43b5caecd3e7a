"""How harnesses list the skills a model may load.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

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
