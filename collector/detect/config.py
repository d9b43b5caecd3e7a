"""Expectations: which skills a session is expected to load (config rules)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    Field,
    field_validator,
)

from collector.configtypes import Strict


class When(Strict):
    user_message: str | None = None  # a regular expression searched in every user message
    attribute: dict[str, str] | None = None  # span or resource attribute equals value

    @field_validator("user_message")
    @classmethod
    def _regex(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{pattern!r} is not a regular expression: {err}") from None
        return pattern


class Expectation(Strict):
    when: When
    expect: tuple[str, ...] = Field(min_length=1)

    @field_validator("expect", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value
