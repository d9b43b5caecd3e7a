"""Which attribute names the session a span or log record belongs to.

First the configured keys (``sessions.keys``), in their order.  When none is present, an
attribute shaped like a session key: one whose name ends in ``conversation_id``,
``session_id``, ``session.id`` or ``thread_id`` (any namespace; ``conversation.id``,
``sessionId`` and the like fold to the same endings), on the item, else on its resource, with
a text value.  A harness that names its conversation only in an attribute of its own
(``acme.conversation_id``) is so grouped without a configured key for it.

A key found by shape is weaker than a configured one: a trace already bound to a session a
configured key named stays there (the assembler's rule), so an id a harness records for
something else on a few spans cannot split a run.  Keys that name another run than the
item's own (a parent's, a previous one's) are not read.

The configured keys are looked up in the item's attributes (``Attributes.by_key``: a test per
key); the names shaped like a session key are worked out once per key set
(``Attributes.shape``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collector.otlp.shapes import kept
from collector.otlp.views import Attributes

# Folded endings (lower case, without "_", "." and "-") of a session key's name, strongest first.
ENDINGS: tuple[str, ...] = ("conversationid", "sessionid", "threadid")
# Folded words that make a key name another run than the item's own.
OTHER_RUN_WORDS: tuple[str, ...] = ("parent", "previous", "prev", "origin")

KeySource = Literal["configured", "shape"]
CONFIGURED: KeySource = "configured"


@dataclass(frozen=True, slots=True)
class FoundKey:
    """A session id and where it was read: ``attribute`` is the key's name."""

    value: str
    source: KeySource
    attribute: str


def _fold(name: str) -> str:
    return name.lower().replace("_", "").replace(".", "").replace("-", "")


def shaped_keys(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names among ``names`` shaped like a session key, strongest first (by ending, then
    the shorter name, then by name)."""
    ranked: list[tuple[int, int, str]] = []
    for name in names:
        folded = _fold(name)
        for rank, ending in enumerate(ENDINGS):
            if folded.endswith(ending):
                if not any(word in folded for word in OTHER_RUN_WORDS):
                    ranked.append((rank, len(name), name))
                break
    return tuple(name for _, _, name in sorted(ranked))


_SHAPED: dict[tuple[str, ...], tuple[str, ...]] = {}  # attribute names -> ``shaped_keys`` of them


def _shaped_of(attrs: Attributes) -> tuple[str, ...]:
    shape = attrs.shape()
    found = _SHAPED.get(shape)
    if found is None:
        found = shaped_keys(shape)
        if kept(shape):
            _SHAPED[shape] = found
    return found


_SKILLED: dict[tuple[str, ...], bool] = {}  # attribute names -> whether one names a skill


def mentions_skills(attrs: Attributes) -> bool:
    """Whether an attribute of ``attrs`` is named for a skill (``gen_ai.skill.name``,
    ``acme.skills``...): skill evidence, which keeps a trace no key named from being taken
    for a harness's housekeeping.  Worked out once per key set."""
    shape = attrs.shape()
    found = _SKILLED.get(shape)
    if found is None:
        found = any("skill" in name.lower() for name in shape)
        if kept(shape):
            _SKILLED[shape] = found
    return found


class SessionKeys:
    """The configured keys (``where:attribute`` pairs, ``where`` "span" or "resource") and,
    when ``by_shape``, keys found by their shape."""

    __slots__ = ("_by_shape", "_configured", "_present")

    def __init__(self, configured: tuple[str, ...], by_shape: bool = True) -> None:
        self._by_shape = by_shape
        # Each configured key, in order: whether it is the item's (else its resource's), its
        # name, and what names a session found under it (``OpenSession.key_source``).
        self._configured = tuple(
            (where == "span", key, f"{CONFIGURED}:{key}")
            for where, key in (k.split(":", 1) for k in configured)
        )
        # Per key shape (``Attributes.shape``): the configured keys an item of it may name a
        # session under, in order (the item's keys it holds, and every resource key).
        self._present: dict[tuple[str, ...], tuple[tuple[bool, str, str], ...]] = {}

    def find(self, values: Attributes, resource: Attributes) -> FoundKey | None:
        """The session id an item (``values``) and its resource name, or None."""
        return self.configured(values, resource) or self.shaped(values, resource)

    def configured(self, values: Attributes, resource: Attributes) -> FoundKey | None:
        """The session id the first configured key present names, or None."""
        found = self.named(values, resource)
        if found is None:
            return None
        return FoundKey(found[0], "configured", found[1].partition(":")[2])

    def named(self, values: Attributes, resource: Attributes) -> tuple[str, str] | None:
        """``configured`` as (session id, ``configured:<attribute>``), or None: what an item
        costs when it is placed (a lookup of its key shape, a value read only for the keys
        it holds)."""
        shape = values.shape()
        present = self._present.get(shape)
        if present is None:
            held = frozenset(shape)
            present = tuple(entry for entry in self._configured if not entry[0] or entry[1] in held)
            if kept(shape):
                self._present[shape] = present
        for on_span, key, source in present:  # most items carry none of the keys, or one
            value = values.get(key) if on_span else resource.get(key)
            # Only text names a session: a key that also holds numbers (Codex CLI's thread.id
            # is, on most spans, the OS thread's number) names none there.
            if type(value) is str and value:
                return value, source
        return None

    def shaped(self, values: Attributes, resource: Attributes) -> FoundKey | None:
        """The session id an attribute shaped like a session key names (on the item, else its
        resource), or None; None always when keys by shape are off."""
        if not self._by_shape:
            return None
        for attrs in (values, resource):
            for key in _shaped_of(attrs):
                value = attrs.get(key)
                if type(value) is str and value:
                    return FoundKey(value, "shape", key)
        return None


__all__ = ["ENDINGS", "FoundKey", "SessionKeys", "mentions_skills", "shaped_keys"]
