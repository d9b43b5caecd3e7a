"""What a session page says in words: why a skill was expected, what each evaluation row
looked at, and what the trace did and did not record of the catalog and the loads.

Pure functions over the records the store keeps (the result lines and the coverage line of
one revision); the words follow the coverage line's own values (``catalog.state``,
``catalog_source``, ``content_capture``), so the page and ``/v1/sessions/{id}`` agree.
"""

from __future__ import annotations

import difflib
from typing import Any, get_args

from evaluators.evidence import Signal, fold_skill_name

# Every detector runs on every span and log record (detection reads by shape); these are
# the families a load can be found by, as the coverage line names a load's signal.
SIGNALS: tuple[str, ...] = get_args(Signal)


def why_expected(because: dict[str, Any] | None) -> str:
    """One expectation's reason, from the coverage line's ``expectations.why`` entry."""
    if not because:
        return "recorded before this version kept the reason"
    rule, pattern, matched, where = (because.get(k, "") for k in ("rule", "pattern", "matched", "where"))
    if rule == "user_message":
        return f"config rule user_message /{pattern}/ matched {matched!r} in the request of {where}"
    if rule == "attribute":
        return f"config rule attribute {pattern} found on {where}"
    return f"the app declared it: {pattern} = {matched!r} on {where}"


def evidence(result: dict[str, Any], coverage: dict[str, Any]) -> list[str]:
    """What a result's verdict was based on, as the records keep it."""
    loads = coverage.get("skill_loads", [])
    if result.get("evaluation") == "skill_invoked":
        return _invoked_evidence(result, loads, coverage.get("content_capture"))
    items = []
    span = result.get("span_id")
    for index, load in enumerate(loads, 1):
        if span and load.get("span_id") == span:
            items.append(f"load #{index} of {load['skill']} ({load['status']}, {load['signal']})")
            break
    else:
        if result.get("signal"):
            items.append(f"signal {result['signal']}")
    if result.get("body_source"):
        items.append(f"SKILL.md body: {result['body_source']}")
    if result.get("catalog_source"):
        items.append(f"catalog: {result['catalog_source']}")
    return items


def _invoked_evidence(result: dict[str, Any], loads: list[dict[str, Any]], capture: object) -> list[str]:
    key = fold_skill_name(str(result.get("skill") or ""))
    matching = [
        f"#{index} {load['skill']} ({load['status']}, {load['signal']})"
        for index, load in enumerate(loads, 1)
        if fold_skill_name(str(load.get("skill", ""))) == key
    ]
    items = [
        f"looked at the {len(loads)} skill load{'' if len(loads) == 1 else 's'} of this session: "
        + (f"of this skill {', '.join(matching)}" if matching else "none of this skill")
    ]
    similar = [
        f"#{index} {load['skill']} ({load['status']}, {load['signal']})"
        for index, load in enumerate(loads, 1)
        if not matching
        and difflib.SequenceMatcher(None, key, fold_skill_name(str(load.get("skill", "")))).ratio() >= 0.8
    ]
    if similar:
        items.append(f"a load of a similar name (not counted): {', '.join(similar)}")
    items.append("signals: every detector ran on every span and log record (" + ", ".join(SIGNALS) + ")")
    if capture == "missing":
        items.append(
            "content capture: missing - tool arguments and results were not recorded, so a SKILL.md "
            "read through a file or shell tool could not be seen"
        )
    elif capture:
        items.append(f"content capture: {capture}")
    return items


def catalog_words(coverage: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """What the trace recorded of the skills advertised to the model, and what the
    evaluations used instead; empty for an advertised catalog (its skills are listed)."""
    catalog = coverage.get("catalog") or {}
    state = catalog.get("state")
    from_registry = any(r.get("catalog_source") == "registry" for r in results)
    if state == "advertised":
        return ""
    if state == "empty":
        said = "The trace recorded a catalog with no skill in it: no skill was advertised to the model."
    else:
        said = (
            "not_recorded: no span or log record of this session showed which skills were advertised "
            "to the model; that does not mean none were."
        )
    if from_registry:
        return said + " Rows marked catalog: registry used the skills of skills.paths instead."
    if state == "not_recorded":
        return said + " No row used a catalog from skills.paths (none configured, or no row needed one)."
    return said


def load_words(load: dict[str, Any]) -> str:
    """What the trace recorded of one load, beyond its status."""
    said = []
    if load.get("status") == "unresolved":
        said.append("the call was recorded; its outcome (a result or an error) was not")
    if not load.get("skill"):
        said.append("the skill's name was not recorded")
    said.append("SKILL.md body recorded" if load.get("has_body") else "SKILL.md body not recorded")
    if load.get("body_truncated"):
        said.append(f"body cut by {load.get('body_chars_cut')} characters")
    return "; ".join(said)


def duration(seconds: object) -> str:
    """A number of seconds as people read it: ``4m 10s``."""
    if not isinstance(seconds, int | float):
        return ""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"
