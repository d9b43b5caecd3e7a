"""A span whose trace is bound to its session alone joins it without the general binding
(``Assembler._bound``): every recording assembles to the same sessions, the same close
reasons and the same duplicates with it and without it, in the order recorded, in reverse
(children and parents swapped across requests), and with every request sent twice, for the
default tenant and another."""

from __future__ import annotations

import pytest
from support import assembled, recorded_trace_requests

from collector.sessions.assembler import Assembler


@pytest.mark.parametrize("tenant", ["", "acme"])
def test_every_recording_assembles_alike_with_and_without_the_bound_session(
    monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    recorded = recorded_trace_requests()
    orders = {
        "recorded": recorded,
        "reversed": recorded[::-1],
        "each twice": [request for request in recorded for _ in range(2)],
        "all twice": recorded + recorded,
    }
    taken = {"bound": 0}
    bound = Assembler._bound

    def counted(self: Assembler, key: str | None, trace: bytes, ident: bytes) -> object:
        found = bound(self, key, trace, ident)
        taken["bound"] += found is not None
        return found

    monkeypatch.setattr(Assembler, "_bound", counted)
    fast = {name: assembled(requests, tenant) for name, requests in orders.items()}
    assert taken["bound"] > 1000  # most spans join the session their trace is bound to
    assert fast["each twice"][1].get("traces", 0) > 1000  # re-sent spans are found by it too
    monkeypatch.setattr(Assembler, "_bound", lambda self, key, trace, ident: None)
    for name, requests in orders.items():
        assert assembled(requests, tenant) == fast[name], name
