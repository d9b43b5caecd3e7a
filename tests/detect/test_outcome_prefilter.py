"""The words ``outcome`` checks before running the refusal pattern: whenever the pattern
matches, one of the words is in the text, whatever the case, spacing or alphabet."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.detect.facts import outcomes as outcome_facts
from collector.detect.outcome import _may_refuse, text_outcome

_PIECES = [
    "Error: ", "Skill 'pdf' not found", "Skill\t'x'  not\n found", "unknown skill", "no such skill",
    "<tool_use_error>", "An error occurred while running the tool", "ERROR:", "\u017fkill", "\u212a", "\u0130",
    "not", "found", "skill", "\n", " ", "'", "done", "# SKILL.md\n", "Unknown  Skill",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=8)), max_size=12))
def test_a_text_the_refusal_pattern_matches_holds_a_refusal_word(pieces: list[str]) -> None:
    text = "".join(pieces)
    if outcome_facts.REFUSALS.search(text):
        assert _may_refuse(text), text


def test_refusals_in_other_cases_and_alphabets_are_still_read() -> None:
    assert text_outcome("\u017fkill 'pdf' NOT FOUND")[0] == "failed"  # a long s folds to s
    assert text_outcome("no \u017fuch \u017fkill")[0] == "failed"
    assert text_outcome("# Release notes\nStep 1: write them.")[0] == "loaded"
