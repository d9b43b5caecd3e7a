"""The ``facts`` package holds every harness fact; the signal modules hold logic and name no harness."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collector.detect import catalogs
from collector.detect.facts import blocks as block_facts
from collector.detect.facts import injections as injection_facts

DETECT = Path(catalogs.__file__).parent
HARNESS_NAMES = re.compile(
    r"strands|\badk\b|google.adk|vertex|claude|anthropic|codex|gemini|openai|openhands|langgraph|langchain"
    r"|langsmith|openinference|deep ?agents|llama",
    re.IGNORECASE,
)


@pytest.mark.parametrize("module", sorted(p.name for p in DETECT.glob("*.py")))
def test_no_module_but_facts_names_a_harness(module: str) -> None:
    lines = (DETECT / module).read_text().splitlines()
    named = [f"{module}:{n}: {line.strip()}" for n, line in enumerate(lines, 1) if HARNESS_NAMES.search(line)]
    assert not named, "\n".join(named)


def _has_marker(word: str) -> bool:
    return any(marker in word for marker in block_facts.BLOCK_MARKERS)


def test_every_block_shape_holds_a_block_marker() -> None:
    # Text without a marker is never walked for blocks, so a shape without one would be missed.
    for key, _ in block_facts.KEYED_BLOCKS:
        assert _has_marker(key), key
    for kind, fields in block_facts.TYPED_BLOCKS.items():  # the type value, or the id key beside it
        assert _has_marker(kind) or _has_marker(fields.id), kind
    for key, _, fields in block_facts.TAGGED_BLOCKS:
        assert _has_marker(key) or _has_marker(fields.id), key


def test_raw_markers_are_in_the_markers_they_stand_for() -> None:
    # Raw text is searched for RAW_MARKERS, decoded strings for MARKERS: each raw marker must
    # be in its marker, or a catalog in raw text could be passed over.
    assert len(catalogs.RAW_MARKERS) == len(catalogs.MARKERS)
    for raw, marker in zip(catalogs.RAW_MARKERS, catalogs.MARKERS, strict=True):
        assert raw in marker
    assert injection_facts.INJECTED_SKILL_MARKER in injection_facts.INJECTION_MARKERS
    assert injection_facts.BASE_DIRECTORY_PREFIX in injection_facts.INJECTION_MARKERS


def test_a_names_catalog_is_a_json_array_of_strings_and_nothing_else() -> None:
    assert [e.name for e in catalogs.names_list('["a-skill", " b ", ""]') or []] == ["a-skill", "b"]
    assert catalogs.names_list("[]") == []
    for text in ("not json", '{"a": 1}', '["a", 2]', '"a"'):
        assert catalogs.names_list(text) is None, text
