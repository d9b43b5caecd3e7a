"""The one-pass marker search (``wire_scan.Markers``) against ``in``, on the markers detection
uses and on random ones, in texts of every str width."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.detect import session
from collector.spans import wire_scan

pytestmark = pytest.mark.skipif(
    wire_scan is None, reason="a pure-Python install searches with `in` (tests/test_interpreted.py)"
)


def _expected(text: str, groups: tuple[tuple[str, ...], ...]) -> int:
    return sum(1 << g for g, group in enumerate(groups) if any(m in text for m in group))


# Pieces of markers, and characters of all three str widths, so that near misses are common.
_PIECES = st.sampled_from(
    [m[: n + 1] for group in session._SCAN_GROUPS for m in group for n in range(len(m))]
    + ["a", " ", "_", "é", "€", "😀", "\n", "\\u003c", '"']
)
_TEXTS = st.lists(_PIECES, max_size=30).map("".join)


@settings(max_examples=2000, deadline=None)
@given(_TEXTS)
def test_detection_markers_are_found_exactly_where_in_finds_them(text: str) -> None:
    assert session._SCAN_MARKERS.found(text) == _expected(text, session._SCAN_GROUPS)
    assert session._CATALOG_MARKERS.found(text) == _expected(text, session._CATALOG_GROUPS)


_MARKER = st.text(alphabet="ab_c", min_size=1, max_size=6)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.lists(_MARKER, min_size=1, max_size=4).map(tuple), min_size=1, max_size=5).map(tuple),
       st.text(alphabet="ab_cé😀", max_size=60))
def test_any_markers_are_found_exactly_where_in_finds_them(groups: tuple[tuple[str, ...], ...], text: str) -> None:
    assert wire_scan.Markers(groups).found(text) == _expected(text, groups)


def test_markers_at_the_very_start_and_end_and_overlapping() -> None:
    groups = (("abc",), ("bcd", "cdx"), ("zz",))
    markers = wire_scan.Markers(groups)
    for text in ("abc", "xabcd", "bcd", "abcdx", "zzabc", "abzz", "ab", "", "ab€cd"):
        assert markers.found(text) == _expected(text, groups), text


@pytest.mark.parametrize(
    "groups, error",
    [
        ((), ValueError),  # no group
        ((("",),), ValueError),  # an empty marker
        ((("é",),), ValueError),  # not ASCII
        (((),), TypeError),  # an empty group
        ((("x",),) * 33, ValueError),  # more groups than bits
        ((tuple("abcdefghijklmnopqrstuvwxyzABCDEFG"),), ValueError),  # 33 markers
    ],
)
def test_markers_it_cannot_search_are_refused_when_made(groups: tuple[tuple[str, ...], ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        wire_scan.Markers(groups)
