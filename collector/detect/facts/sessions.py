"""Where harnesses record the id of the session a span belongs to.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

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
