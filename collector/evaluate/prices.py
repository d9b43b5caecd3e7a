"""List prices of the judge's models on each provider: one table, keyed by the model's
name on the Claude API, and the rule that maps a Bedrock or Vertex model id onto it.

Figures are US dollars per million tokens, as published on Anthropic's pricing and model
pages (platform.claude.com/docs/en/about-claude/pricing and the models' overview pages, read
December 2026).  Assumptions, stated because they decide what a budget in USD means:

- Bedrock and Vertex list Claude at the Claude API's prices on their *global* endpoints
  (Bedrock ``global.`` inference profiles, Vertex region ``global``).
- *Regional* endpoints cost 10 % more for Claude Sonnet 4.5 and every later model: on
  Bedrock an in-region model id (``anthropic.claude-...``) or a geographic inference
  profile (``us.``, ``eu.``, ``apac.``, ``jp.``, ``au.``...), on Vertex any region other
  than ``global`` (including the multi-region ``us`` / ``eu`` endpoints).  Older models kept
  one price everywhere.
- Cache reads cost 0.1x and 5-minute cache writes 1.25x of input unless the table says
  otherwise (Claude Opus 5.5 reads at 0.05x).
- Tiered prices (Claude Haiku 5.5 above 100k prompt tokens) are not modelled: the table
  holds the lower tier, so a long-prompt Haiku 5.5 call is under-counted.

Operators with negotiated prices set ``judge.prices`` (exact model ids); those win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Provider = Literal["anthropic", "bedrock", "vertex"]
REGIONAL_UPLIFT = 1.10


@dataclass(frozen=True, slots=True)
class ListPrice:
    input: float
    output: float
    cache_read: float | None = None  # None: 0.1 x input
    cache_write: float | None = None  # None: 1.25 x input
    regional_uplift: bool = True  # False: one price on every endpoint (models before Sonnet 4.5)

    def scaled(self, factor: float) -> ListPrice:
        return ListPrice(
            self.input * factor,
            self.output * factor,
            None if self.cache_read is None else self.cache_read * factor,
            None if self.cache_write is None else self.cache_write * factor,
            self.regional_uplift,
        )


# Claude API model name -> list price (global endpoint).
LIST_PRICES: dict[str, ListPrice] = {
    "claude-opus-5-5": ListPrice(4.0, 20.0, cache_read=0.20, cache_write=5.0),
    "claude-opus-5": ListPrice(5.0, 25.0),
    "claude-sonnet-5-5": ListPrice(2.0, 10.0),
    "claude-sonnet-5": ListPrice(2.0, 10.0),
    "claude-haiku-5-5": ListPrice(0.10, 0.50),
    "claude-opus-4-8": ListPrice(5.0, 25.0),
    "claude-opus-4-7": ListPrice(5.0, 25.0),
    "claude-opus-4-6": ListPrice(5.0, 25.0),
    "claude-opus-4-5": ListPrice(5.0, 25.0),
    "claude-sonnet-4-6": ListPrice(3.0, 15.0),
    "claude-sonnet-4-5": ListPrice(3.0, 15.0),
    "claude-haiku-4-5": ListPrice(1.0, 5.0),
    "claude-sonnet-4": ListPrice(3.0, 15.0, regional_uplift=False),
    "claude-opus-4-1": ListPrice(15.0, 75.0, regional_uplift=False),
}

# The judge's default model on each provider (all Claude Sonnet 5.5).  Bedrock's default
# is the global inference profile: the cheapest endpoint and the one with most capacity.
DEFAULT_MODELS: dict[Provider, str] = {
    "anthropic": "claude-sonnet-5-5",
    "bedrock": "global.anthropic.claude-sonnet-5-5",
    "vertex": "claude-sonnet-5-5",
}

# [geo.]anthropic.<name>[-YYYYMMDD][-v1:0]; an ARN ends with one of those after the last '/'.
_BEDROCK = re.compile(
    r"^(?:(?P<geo>[a-z]{2,6})\.)?anthropic\.(?P<name>claude-[a-z0-9-]+?)(?:-\d{8})?(?:-v\d+(?::\d+)?)?$"
)
# <name>[@YYYYMMDD]
_VERTEX = re.compile(r"^(?P<name>claude-[a-z0-9-]+?)(?:@\d{8})?$")
_ANTHROPIC = re.compile(r"^(?P<name>claude-[a-z0-9-]+?)(?:-\d{8})?$")


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A provider's model id read back to its Claude API name and endpoint kind."""

    name: str
    regional: bool


def model_ref(provider: Provider, model: str, vertex_region: str | None = None) -> ModelRef | None:
    """The Claude API name behind ``model`` on ``provider``, or None if it is not a model id
    of that provider's form."""
    if provider == "bedrock":
        match = _BEDROCK.match(model.rsplit("/", 1)[-1])
        if match is None:
            return None
        return ModelRef(match.group("name"), regional=match.group("geo") != "global")
    if provider == "vertex":
        match = _VERTEX.match(model)
        if match is None:
            return None
        return ModelRef(match.group("name"), regional=(vertex_region or "global") != "global")
    match = _ANTHROPIC.match(model)
    return None if match is None else ModelRef(match.group("name"), regional=False)


def list_price(provider: Provider, model: str, vertex_region: str | None = None) -> ListPrice | None:
    """The list price of ``model`` as ``provider`` bills it (None: not in the table)."""
    ref = model_ref(provider, model, vertex_region)
    if ref is None:
        return None
    price = LIST_PRICES.get(ref.name)
    if price is None:
        return None
    return price.scaled(REGIONAL_UPLIFT) if ref.regional and price.regional_uplift else price


def model_problem(provider: Provider, model: str) -> str | None:
    """Why ``model`` cannot be a model id on ``provider`` (with the fix), or None."""
    if provider == "anthropic":  # a gateway may name models its own way: only the others' forms are wrong
        if _BEDROCK.match(model.rsplit("/", 1)[-1]) or model.startswith("arn:"):
            return f"{model!r} is a Bedrock model id - set judge.provider: bedrock, or use e.g. claude-sonnet-5-5"
        if "@" in model:
            return f"{model!r} is a Vertex AI model id - set judge.provider: vertex, or use e.g. claude-sonnet-5-5"
        return None
    if model_ref(provider, model) is not None or (provider == "bedrock" and model.startswith("arn:aws")):
        return None  # an ARN of an application inference profile names no model: judge.prices must
    default = DEFAULT_MODELS[provider]
    if provider == "bedrock":
        return (
            f"{model!r} is not a Bedrock model id - use a foundation model id such as "
            f"anthropic.claude-sonnet-5-5 or an inference profile such as {default} or "
            "us.anthropic.claude-sonnet-5-5 (an inference-profile ARN works too)"
        )
    return (
        f"{model!r} is not a Vertex AI model id - use the publisher model name, e.g. {default} "
        "(older models carry a date: claude-sonnet-4-5@20250929)"
    )
