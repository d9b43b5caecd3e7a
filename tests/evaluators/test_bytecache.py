"""Caches sized in bytes: what they hold stays under their size whatever the texts' sizes."""

from __future__ import annotations

import pytest

from evaluators.bytecache import CACHES, ENTRY_OVERHEAD, ByteCache, memo_by_text, text_bytes


def test_the_least_recently_used_entries_go_first_to_stay_within_the_size() -> None:
    cache: ByteCache[str, int] = ByteCache("test-lru", 10 * (100 + ENTRY_OVERHEAD))
    for n in range(10):
        assert cache.put(f"k{n}", n, 100)
    assert cache.get("k0", None) == 0  # now the most recently used
    cache.put("k10", 10, 100)
    assert cache.get("k1", None) is None and cache.get("k0", None) == 0
    assert cache.bytes == 10 * (100 + ENTRY_OVERHEAD) and cache.evictions == 1


def test_a_few_large_entries_push_out_many_small_ones_and_the_total_stays_bounded() -> None:
    cache: ByteCache[str, str] = ByteCache("test-large", 1_000_000)
    for n in range(1_000):
        cache.put(f"small{n}", "v", 500)
    for n in range(20):
        cache.put(f"large{n}", "v", 200_000)
        assert cache.bytes <= cache.max_bytes
    assert len(cache) == 4  # 5 * 200 KB would be over 1 MB with the overhead


def test_an_entry_over_a_quarter_of_the_cache_is_never_kept() -> None:
    cache: ByteCache[str, str] = ByteCache("test-huge", 1_000_000)
    cache.put("kept", "v", 100)
    assert not cache.put("huge", "v", 300_000)
    assert cache.get("huge", None) is None and cache.get("kept", None) == "v"


def test_a_text_memo_counts_the_text_and_its_value_and_answers_the_same() -> None:
    calls: list[str] = []

    @memo_by_text("test-memo", 64 * 1024, value_factor=1.0)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    text = "x" * 1_000
    assert length(text) == length(text) == 1_000
    assert calls == [text]
    cache = CACHES["test-memo"]
    assert cache.bytes == 2 * text_bytes(text) + ENTRY_OVERHEAD
    for n in range(100):  # 100 distinct 2 KB-costing texts: far more than 64 KB
        length(str(n) * 1_000)
    assert cache.bytes <= 64 * 1024


def test_a_cache_must_have_room() -> None:
    with pytest.raises(ValueError, match="max_bytes must be positive"):
        ByteCache("test-empty", 0)
