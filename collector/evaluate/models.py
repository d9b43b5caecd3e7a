"""How the judge asks each model for a verdict: one row per model of the price table, keyed
by the model's Claude API name (a Bedrock or Vertex id is read back to it by
``prices.model_ref``).

Verdict mechanism (``verdict``):

- ``"json"``: structured outputs (``output_config.format`` with a ``json_schema``, GA, no
  beta header); the reply's first text block is the verdict as JSON.  Every model since
  Claude Sonnet 4.5 / Opus 4.5 / Haiku 4.5 supports it, and it is the only one left on
  Claude Sonnet 5.5 and Opus 5.5, which answer a forced ``tool_choice`` (``tool`` or
  ``any``) with 400 invalid_request_error.
- ``"tool"``: a forced call of the verdict tool, for the older models of the table that
  have no structured outputs (Claude Sonnet 4, Opus 4.1).

Thinking and effort (what makes a short verdict cheap and still valid):

- Where thinking can be switched off it is (``thinking: disabled`` on Claude Sonnet 5 and
  Opus 5, which think by default; older models do not think unless asked) and effort is
  left at the model's default, so the verdict's reasoning text is as thorough as before.
- Claude Sonnet 5.5 rejects ``disabled`` (400); its lowest setting is
  ``{"type": "between_tools"}`` (allowed at effort low, medium and high, the default being
  high).  A judge request carries no tools, so the reply is text only, as with
  ``disabled``: no thinking tokens, and effort stays at the default.
- Claude Opus 5.5 always thinks adaptively; Claude Haiku 5.5 thinks adaptively by default.
  Both get ``output_config.effort: low``, at which the model may skip thinking for a simple
  question, and ``judge.max_tokens`` (default 2048) leaves room for what thinking remains.

A model not in the table (a gateway's own name, a Bedrock application inference profile)
gets structured outputs and no thinking or effort field: what every current model accepts.
Bedrock and Vertex take the same body (structured outputs included; on Vertex the
organization policy ``constraints/vertexai.allowedPartnerModelFeatures`` must allow
``structured_outputs``, which it does not by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from collector.evaluate.prices import Provider, model_ref

Verdict = Literal["json", "tool"]
Effort = Literal["low", "medium", "high"]
_DISABLED: dict[str, Any] = {"type": "disabled"}


@dataclass(frozen=True, slots=True)
class JudgeModel:
    verdict: Verdict = "json"
    thinking: dict[str, Any] | None = None  # the request's ``thinking`` (None: not sent)
    effort: Effort | None = None  # ``output_config.effort`` (None: not sent)


# Claude API model name -> how to ask it.  Every model of prices.LIST_PRICES has a row.
JUDGE_MODELS: dict[str, JudgeModel] = {
    "claude-opus-5-5": JudgeModel(effort="low"),
    "claude-opus-5": JudgeModel(thinking=_DISABLED),
    "claude-sonnet-5-5": JudgeModel(thinking={"type": "between_tools"}),
    "claude-sonnet-5": JudgeModel(thinking=_DISABLED),
    "claude-haiku-5-5": JudgeModel(effort="low"),
    "claude-opus-4-8": JudgeModel(),
    "claude-opus-4-7": JudgeModel(),
    "claude-opus-4-6": JudgeModel(),
    "claude-opus-4-5": JudgeModel(),
    "claude-sonnet-4-6": JudgeModel(),
    "claude-sonnet-4-5": JudgeModel(),
    "claude-haiku-4-5": JudgeModel(),
    "claude-sonnet-4": JudgeModel(verdict="tool"),
    "claude-opus-4-1": JudgeModel(verdict="tool"),
}
UNKNOWN = JudgeModel()


def judge_model(provider: Provider, model: str) -> JudgeModel:
    """The row for ``model`` as ``provider`` names it (``UNKNOWN`` if it has none)."""
    ref = model_ref(provider, model)
    return JUDGE_MODELS.get(ref.name, UNKNOWN) if ref is not None else UNKNOWN
