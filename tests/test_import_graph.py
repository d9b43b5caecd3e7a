"""The import graph keeps its rules (``tests/import_graph.py`` prints it)."""

from __future__ import annotations

from import_graph import graph, violations


def test_no_cycle_and_every_arrow_points_down() -> None:
    assert violations(graph()) == []


def test_the_check_sees_a_cycle_and_an_upward_import() -> None:
    edges = {"collector.sessions.stage": {"collector.config"}, "collector.config": {"collector.sessions.stage"}}
    found = violations(edges)
    assert any(v.startswith("import cycle") for v in found)
    assert any("a component imports nothing above it" in v for v in found)


def test_the_check_sees_the_database_layer_import_a_stage() -> None:
    edges = {
        "collector.db.writer": {"collector.status.view", "collector.db.sql"},
        "collector.db.sql": set(),
        "collector.status.view": set(),
    }
    assert violations(edges) == [
        "collector.db.writer imports collector.status.view: the database layer imports no stage"
    ]


def test_the_check_sees_the_store_import_a_stage() -> None:
    edges = {
        "collector.state.facade": {"collector.export.outbox", "collector.status.view", "collector.db.writer"},
        "collector.export.outbox": set(),
        "collector.status.view": set(),
        "collector.db.writer": set(),
    }
    assert violations(edges) == [
        "collector.state.facade imports collector.export.outbox: the store imports no stage",
        "collector.state.facade imports collector.status.view: the store imports no stage",
    ]
