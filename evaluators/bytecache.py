"""Memo caches sized in bytes, not entries: a cache keyed by texts holds at most
``max_bytes`` of them (and of what was made from them), whatever their sizes.

An entry's cost is an estimate made when it is put: the key's size in memory plus what the
caller says the value costs (typically a multiple of the key's, for values parsed from it).
The least recently used entries go first; an entry costing more than a quarter of the cache
is never kept (it would push out everything else), and is computed again on each call.

Every cache made here is listed in ``CACHES`` under its name, so the service can report
each one's size (``skillgauge_cache_bytes{cache}``).  Pure: no I/O, no threads; not safe
for concurrent use from several threads.
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

ENTRY_OVERHEAD = 200  # the cache's own bookkeeping per entry (dict slot, tuple, ints)


class ByteCache(Generic[K, V]):
    """A least-recently-used map holding at most ``max_bytes`` of estimated cost."""

    def __init__(self, name: str, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"cache {name!r}: max_bytes must be positive, not {max_bytes}")
        self.name = name
        self.max_bytes = max_bytes
        self.bytes = 0  # the estimated cost of what is held now
        self.evictions = 0  # entries pushed out to make room, since the start
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, default: T) -> V | T:
        """The value kept for ``key`` (now the most recently used), else ``default``."""
        found = self._entries.get(key)
        if found is None:
            return default
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, cost: int) -> bool:
        """Keep ``value`` for ``key`` at ``cost`` bytes, pushing out the least recently used
        entries as needed; False (nothing kept) when ``cost`` exceeds a quarter of the cache."""
        cost += ENTRY_OVERHEAD
        if cost > self.max_bytes // 4:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        while self._entries and self.bytes + cost > self.max_bytes:
            _, (_, freed) = self._entries.popitem(last=False)
            self.bytes -= freed
            self.evictions += 1
        self._entries[key] = (value, cost)
        self.bytes += cost
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0


CACHES: dict[str, ByteCache[object, object]] = {}  # every cache made by ``memo_by_text``, by name


def text_bytes(text: str) -> int:
    """A text's size in memory (1, 2 or 4 bytes a character, and the object's header)."""
    return sys.getsizeof(text)


def memo_by_text(
    name: str, max_bytes: int, value_factor: float
) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """A decorator memoising a function of one text in a ``ByteCache`` named ``name``: an
    entry costs the text's bytes times ``1 + value_factor`` (the value's estimated share).
    Values are shared between callers and must not be modified."""

    def wrap(function: Callable[[str], T]) -> Callable[[str], T]:
        cache: ByteCache[str, T] = ByteCache(name, max_bytes)
        CACHES[name] = cache  # type: ignore[assignment]
        entries = cache._entries  # a hit is ``ByteCache.get`` inline (the same map for the cache's life)

        @functools.wraps(function)
        def cached(text: str) -> T:
            found = entries.get(text)
            if found is not None:
                entries.move_to_end(text)
                return found[0]
            value = function(text)
            cache.put(text, value, int(text_bytes(text) * (1 + value_factor)))
            return value

        cached.cache = cache  # type: ignore[attr-defined]
        return cached

    return wrap


def register(cache: ByteCache[K, V]) -> ByteCache[K, V]:
    """List a cache made directly in ``CACHES`` (under its name); returns it."""
    CACHES[cache.name] = cache  # type: ignore[assignment]
    return cache
