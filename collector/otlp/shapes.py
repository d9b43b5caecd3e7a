"""Key shapes: the keys of an attribute map, one object for the same keys, kept in bounds.

What depends on a map's keys alone (a span's plan, which of its keys may name a session) is
worked out once per shape and kept in caches keyed by it (``kept`` tells those caches which
shapes they may keep).  The keys come from the telemetry, so the shapes kept are bounded
twice: ``SHAPES_KEPT`` of them, and ``SHAPES_MAX_BYTES`` of estimated memory (the keys, and
the tuples holding them in the shape and in what is worked out from it).  A client sending
spans with ever new keys, however long, fills that and no more: a shape past it is made
anew for each map, and nothing is kept for it (its work is done again for each span).
``size`` reports the bytes held on ``/metrics`` (``skillgauge_cache_bytes{cache="key_shapes"}``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from evaluators.bytecache import ENTRY_OVERHEAD

SHAPES_KEPT = 4096  # a deployment has a few dozen
SHAPES_MAX_BYTES = 32 * 1024**2  # ~160 KB on the benchmark traffic of 29 harnesses (126 shapes)
# Span names this long or longer are not remembered with their shape (``shape_of``'s ``name``).
NAME_CHARS_KEPT = 256


class Shape(tuple[str, ...]):
    """A key shape (``Attributes.shape``): the keys of an attribute map.  Hashed by identity,
    so that a cache keyed by shapes looks one up without hashing or comparing its keys:
    ``shape_of`` gives the same object for the same keys in the same order, for the shapes
    it keeps (``kept``); past those, a new one each time, which such a cache must not keep."""

    __slots__ = ()
    __hash__ = object.__hash__


_SHAPES: dict[tuple[str, ...], Shape] = {}  # keys, in a map's order -> the one ``Shape`` of them
_KEPT: set[Shape] = set()  # the values of ``_SHAPES``
# (span name, key count) -> the shape a span of that name and count had last.  Tested key by
# key (``in``) before it is taken: that costs less than making a ``str`` of each key of the
# map and hashing them.
_LIKELY: dict[tuple[str, int], Shape] = {}
_held = 0  # estimated bytes of the shapes kept
_refused = 0  # shapes not kept for want of room


def shape_of(attributes: Mapping[str, Any], name: str | None = None) -> Shape:
    """The ``Shape`` of an attribute map's keys.  ``name``: the span's name, when the map is a
    span's: the shape a span of that name with as many keys had last is then tested first
    (the same keys, maybe in another order: what depends on the order is worked out from the
    keys sorted, see ``Attributes.shape``)."""
    if name is not None:
        likely = _LIKELY.get((name, len(attributes)))
        if likely is not None:
            for key in likely:  # as many keys, each of them in the map: the same keys
                if key not in attributes:
                    break
            else:
                return likely
    keys = tuple(attributes)
    shape = _SHAPES.get(keys)
    if shape is None:
        shape = Shape(keys)
        if not _keep(keys, shape):
            return shape
    if (
        name is not None
        and len(name) < NAME_CHARS_KEPT
        and (len(_LIKELY) < SHAPES_KEPT or (name, len(keys)) in _LIKELY)
    ):
        _LIKELY[name, len(keys)] = shape
    return shape


def _keep(keys: tuple[str, ...], shape: Shape) -> bool:
    """Keep ``shape`` if there is room for it; whether it was kept."""
    global _held, _refused
    cost = cost_of(keys)
    if len(_SHAPES) >= SHAPES_KEPT or _held + cost > SHAPES_MAX_BYTES:
        _refused += 1
        return False
    _SHAPES[keys] = shape
    _KEPT.add(shape)
    _held += cost
    return True


def cost_of(keys: tuple[str, ...]) -> int:
    """A shape's estimated memory: its keys, and a tuple of them for the shape and for what
    is worked out from it (which holds the same strings)."""
    return sum(map(sys.getsizeof, keys)) + 2 * sys.getsizeof(keys) + ENTRY_OVERHEAD


def kept(shape: Shape) -> bool:
    """Whether ``shape`` is one ``shape_of`` keeps: a cache keyed by shapes keeps an entry
    for it, and for no other (that one would never be found again)."""
    return shape in _KEPT


def size() -> tuple[int, int, int]:
    """(bytes held, the most that may be, shapes not kept for want of room so far)."""
    return _held, SHAPES_MAX_BYTES, _refused


__all__ = ["SHAPES_KEPT", "SHAPES_MAX_BYTES", "Shape", "kept", "shape_of", "size"]
