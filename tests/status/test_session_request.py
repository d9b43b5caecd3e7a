"""The session page shows what the user asked, in the user's own words, and where it came
from; a session whose harness recorded no request says so."""

from __future__ import annotations

import asyncio
import html
import json

from support import FRAMEWORKS

from collector.config import parse
from collector.replay import replay
from collector.status.pages import render, revision


def page_of(framework: str, name: str) -> str:
    scenario = json.loads((FRAMEWORKS / framework / "expected.json").read_text())["scenarios"][name]
    outcome = asyncio.run(replay([str(FRAMEWORKS / framework / f) for f in scenario["files"]], parse({})))
    (coverage,) = [c for c in outcome.coverages if c.session.session_id == scenario["session_id"]]
    records = [r.to_dict() for r in coverage.results] + [{"coverage": coverage.to_dict()}]
    response = render(
        "session.html",
        session_id=scenario["session_id"],
        live=None,
        revisions=[revision(records)],
        trace_link=lambda _trace_id: None,
        why_no_results="",
    )
    assert response.text is not None
    return html.unescape(response.text)


def test_the_page_shows_the_request_without_the_folder_tree_the_harness_put_around_it() -> None:
    page = page_of("gemini_cli", "right_skill_traces")
    assert "User's request" in page
    assert "Write release notes for these merged changes: added CSV export; fixed login timeout;" in page
    assert "<session_context>" not in page and "└───" not in page
    assert "read from log_prompt" in page and "Session named by configured:session.id" in page


def test_the_page_says_when_no_request_was_recorded() -> None:
    page = page_of("kilo_cli", "right_skill")
    assert "Not recorded: no span or log record of this session held what the user asked" in page
