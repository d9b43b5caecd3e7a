"""The session page's words, from the records alone."""

from __future__ import annotations

from collector.status.explain import catalog_words, duration, evidence, load_words, why_expected


def _load(skill: str, status: str = "loaded", signal: str = "skill_tool") -> dict[str, object]:
    return {"skill": skill, "status": status, "signal": signal, "has_body": False, "span_id": "ab"}


def test_why_each_kind_of_expectation_says_what_made_it() -> None:
    assert why_expected(
        {"rule": "user_message", "pattern": "(?i)release notes", "matched": "Write release notes", "where": "turn 2"}
    ) == "config rule user_message /(?i)release notes/ matched 'Write release notes' in the request of turn 2"
    assert why_expected(
        {"rule": "attribute", "pattern": "app.workflow=postmortem", "matched": "", "where": "span 'run' (ab)"}
    ) == "config rule attribute app.workflow=postmortem found on span 'run' (ab)"
    assert why_expected(
        {"rule": "expected_skills", "pattern": "skillgauge.expected_skills", "matched": "pdf", "where": "its resource"}
    ) == "the app declared it: skillgauge.expected_skills = 'pdf' on its resource"


def test_a_skill_invoked_row_names_the_loads_looked_at_and_a_near_miss() -> None:
    coverage = {"skill_loads": [_load("pdf"), _load("relese-notes", "failed")], "content_capture": "missing"}
    said = evidence({"evaluation": "skill_invoked", "skill": "release-notes"}, coverage)
    assert said[0] == "looked at the 2 skill loads of this session: none of this skill"
    assert said[1] == "a load of a similar name (not counted): #2 relese-notes (failed, skill_tool)"
    assert said[2].startswith("signals: every detector ran on every span and log record (skill_tool, file_read")
    assert said[3].startswith("content capture: missing - tool arguments and results were not recorded")
    met = evidence({"evaluation": "skill_invoked", "skill": "PDF"}, coverage)
    assert met[0] == "looked at the 2 skill loads of this session: of this skill #1 pdf (loaded, skill_tool)"


def test_catalog_words_match_the_coverage_line() -> None:
    registry = [{"evaluation": "skill_omission", "catalog_source": "registry"}]
    assert catalog_words({"catalog": {"state": "advertised"}}, []) == ""
    words = catalog_words({"catalog": {"state": "not_recorded"}}, registry)
    assert words.startswith("not_recorded: no span or log record")
    assert words.endswith("Rows marked catalog: registry used the skills of skills.paths instead.")
    assert "No row used a catalog from skills.paths" in catalog_words({"catalog": {"state": "not_recorded"}}, [])
    assert "no skill was advertised" in catalog_words({"catalog": {"state": "empty"}}, [])


def test_load_words_and_durations() -> None:
    assert load_words(_load("pdf", "unresolved")) == (
        "the call was recorded; its outcome (a result or an error) was not; SKILL.md body not recorded"
    )
    assert (duration(250.4), duration(42), duration(7320), duration(None)) == ("4m 10s", "42s", "2h 2m", "")
