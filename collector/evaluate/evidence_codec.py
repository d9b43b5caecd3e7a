"""A closed session's evidence (``evaluators.evidence.Session``) as bytes and back: what the
shared store keeps of a revision whose judge work is queued, so that any replica can plan
it again and finish it without the request log it was assembled from.

The bytes are zlib-compressed JSON of every field; ``decode(encode(s)) == s`` for every
session (a test holds it to every field).  A session the evaluators cannot read back is a
``ValueError``.
"""

from __future__ import annotations

import zlib
from dataclasses import fields, is_dataclass
from typing import Any

import orjson

from evaluators.evidence import (
    Because,
    Catalog,
    CatalogEntry,
    Session,
    SkillLoad,
    ToolCall,
    Turn,
    UnreadableItem,
)


def encode(session: Session) -> bytes:
    return zlib.compress(orjson.dumps(_plain(session)), 1)


def decode(data: bytes) -> Session:
    try:
        raw = orjson.loads(zlib.decompress(data))
        catalog = raw["catalog"]
        first = raw["first_agent_span"]
        return Session(
            **{
                **raw,
                "turns": [Turn(**t) for t in raw["turns"]],
                "tool_calls": [ToolCall(**t) for t in raw["tool_calls"]],
                "skill_loads": [SkillLoad(**load) for load in raw["skill_loads"]],
                "catalog": Catalog(
                    **{**catalog, "skills": {k: CatalogEntry(**e) for k, e in catalog["skills"].items()}}
                ),
                "expected_because": {k: Because(**b) for k, b in raw["expected_because"].items()},
                "first_agent_span": None if first is None else (str(first[0]), str(first[1])),
                "unreadable": [UnreadableItem(**u) for u in raw["unreadable"]],
            }
        )
    except (zlib.error, orjson.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"not a session's evidence: {err}") from None


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
