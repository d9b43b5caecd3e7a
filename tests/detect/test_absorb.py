"""A provisional session's evidence taken in by the session a key names (``SessionEvidence.absorb``).

Most provisional sessions are folded into a session a key has just named, which has observed
nothing yet: that one takes the provisional one's containers as they are.  These tests hold
that shortcut to what adding them one by one gives, on every recording.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import FRAMEWORKS

from collector.detect.session import SessionEvidence
from collector.otlp.views import LogView, ResourceView, SpanView
from collector.receiver.errors import ReceiveError
from collector.replay import requests_in
from evaluators.evidence import Session, UnreadableItem

RECORDINGS = sorted(FRAMEWORKS.glob("*/*.jsonl"))


def _observed(paths: list[Path]) -> SessionEvidence:
    """Evidence that observed every span and log record of ``paths``, as one session."""
    evidence = SessionEvidence()
    for path in paths:
        for _, received in requests_in(path):
            if isinstance(received, ReceiveError):
                continue
            if received.signal == "traces":
                for resource_spans in received.request.resource_spans:
                    resource = ResourceView(resource_spans.resource)
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            evidence.observe_span(SpanView(span, scope_spans.scope.name, resource))
            else:
                for resource_logs in received.request.resource_logs:
                    resource = ResourceView(resource_logs.resource)
                    for scope_logs in resource_logs.scope_logs:
                        for record in scope_logs.log_records:
                            evidence.observe_log(LogView(record, scope_logs.scope.name, resource))
    return evidence


def _finished(evidence: SessionEvidence) -> Session:
    return evidence.finish("s", 1, "idle")


def _by_folder() -> list[list[Path]]:
    folders: dict[Path, list[Path]] = {}
    for path in RECORDINGS:
        folders.setdefault(path.parent, []).append(path)
    return list(folders.values())


@pytest.mark.parametrize("paths", _by_folder(), ids=lambda paths: paths[0].parent.name)
def test_a_session_that_observed_nothing_takes_in_a_provisional_one_as_adding_one_by_one_does(
    paths: list[Path],
) -> None:
    taken_whole = SessionEvidence()
    taken_whole.absorb(_observed(paths))
    one_by_one = SessionEvidence()
    one_by_one._records = 1  # a log record observed (nothing read from it): not empty, so merged
    one_by_one.absorb(_observed(paths))
    assert _finished(taken_whole) == _finished(one_by_one)
    assert _finished(taken_whole) == _finished(_observed(paths))


def test_what_few_sessions_gather_is_taken_in_whichever_way_absorb_goes() -> None:
    provisional = SessionEvidence()
    provisional.note_unreadable(UnreadableItem("span", "t", "s", "bad_value", "first"))
    fresh, merged = SessionEvidence(), SessionEvidence()
    merged.note_unreadable(UnreadableItem("log", "", "", "bad_value", "own"))
    fresh.absorb(provisional)
    merged.absorb(provisional)
    assert [u.detail for u in _finished(fresh).unreadable] == ["first"]
    assert _finished(fresh).unreadable_count == 1
    assert [u.detail for u in _finished(merged).unreadable] == ["own", "first"]
    assert _finished(merged).unreadable_count == 2
    assert _finished(SessionEvidence()).unreadable_count == 0
