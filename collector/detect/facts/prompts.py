"""Where spans keep prompts and answers, and what harnesses put around the user's words.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

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
# The user's own words (``user_request``): markers of what harnesses inject, as data; the
# rule itself (structured context is removed, prose is kept) is general.
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
# Keys one of those words matches that hold no text by their name: a count, a size, an id
# or a name (``gen_ai.usage.prompt_tokens``, ``llm.token_count.prompt``,
# ``gen_ai.input.messages.size``, ``qwen-code.prompt_id``, ``gen_ai.prompt.name``; compared
# casefolded), and the provider as the GenAI and OpenInference conventions name it.
PROMPT_KEY_NOT_TEXT_WORDS: tuple[str, ...] = ("token",)
PROMPT_KEY_NOT_TEXT_ENDINGS: tuple[str, ...] = (".size", "_id", ".name")
PROMPT_KEY_NOT_TEXT: frozenset[str] = frozenset({"gen_ai.system", "llm.system"})
# Attributes outside the tables above that hold an operation's input in a harness's own
# namespace (``haystack.agent.input``, ``haystack.pipeline.input_data``): by the key's last
# part.  A message list in one (at its top, under a history key, or under one component's
# name) holds the user's requests; any of them may hold a catalog.
INPUT_KEY_ENDINGS: tuple[str, ...] = (".input", ".input_data")
# Prefixes of keys another reader takes already (OpenInference's flattened messages).
PROMPT_KEY_SKIP_PREFIXES: tuple[str, ...] = (FLATTENED_PREFIX, "llm.output_messages.")
# Shorter text holds no catalog or history worth reading (a model name, a count).
PROMPT_MIN_CHARS = 64
