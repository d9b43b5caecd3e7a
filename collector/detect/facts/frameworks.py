"""How telemetry names the framework that recorded it.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

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
