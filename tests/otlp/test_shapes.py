"""Key shapes are kept within their bounds, and what is worked out from a shape is kept only
for a shape that is kept: a client sending ever new keys costs work, not memory."""

from __future__ import annotations

import pytest

from collector.detect import plans
from collector.otlp import classes, shapes
from collector.otlp.shapes import kept, shape_of
from collector.otlp.views import Attributes
from collector.sessions import keys


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes, and the caches keyed by them, as a new process has them, with room for 64 KiB."""
    monkeypatch.setattr(shapes, "_SHAPES", {})
    monkeypatch.setattr(shapes, "_KEPT", set())
    monkeypatch.setattr(shapes, "_LIKELY", {})
    monkeypatch.setattr(shapes, "_held", 0)
    monkeypatch.setattr(shapes, "_refused", 0)
    monkeypatch.setattr(shapes, "SHAPES_MAX_BYTES", 64 * 1024)
    monkeypatch.setattr(plans, "_PLANS", {})
    monkeypatch.setattr(keys, "_SHAPED", {})


def _span(*names: str, name: str = "chat") -> classes.Span:
    span = classes.Span(name=name)
    for key in names:
        span.attributes[key].string_value = "v"
    return span


def test_the_same_keys_are_one_shape_kept_with_what_is_worked_out_from_it(fresh: None) -> None:
    one, two = _span("session.id", "gen_ai.operation.name"), _span("session.id", "gen_ai.operation.name")
    shape = shape_of(one.attributes, one.name)
    assert shape_of(two.attributes, two.name) is shape and kept(shape)
    assert plans.plan_of(Attributes(one.attributes, name=one.name)) is plans._PLANS[shape]
    held, most, refused = shapes.size()
    assert 0 < held <= most and refused == 0


def test_shapes_past_the_bytes_are_made_anew_and_nothing_is_kept_for_them(fresh: None) -> None:
    made = [_span(*(f"k{n}.{k}." + "x" * 1000 for k in range(8)), "session.id") for n in range(20)]
    found = [shape_of(span.attributes, span.name) for span in made]
    held, most, refused = shapes.size()
    assert held <= most == 64 * 1024
    assert 0 < refused < 20 and len(shapes._KEPT) == 20 - refused
    late = made[-1]
    again = shape_of(late.attributes, late.name)
    assert again == found[-1] and again is not found[-1]  # a new object for each map
    assert not kept(again)
    attrs = Attributes(late.attributes, name=late.name)
    plans.plan_of(attrs)
    keys.SessionKeys(()).shaped(attrs, Attributes(classes.Resource().attributes))
    assert attrs.shape() not in plans._PLANS and attrs.shape() not in keys._SHAPED
    assert len(plans._PLANS) == 0  # no plan was asked for a kept shape
    assert all(kept(shape) for shape in shapes._LIKELY.values())  # only kept shapes are remembered


def test_a_long_span_name_is_not_remembered_with_its_shape(fresh: None) -> None:
    span = _span("session.id", name="n" * shapes.NAME_CHARS_KEPT)
    shape = shape_of(span.attributes, span.name)
    assert kept(shape)
    assert not shapes._LIKELY
    short = _span("session.id", name="chat")
    assert shape_of(short.attributes, short.name) is shape
    assert list(shapes._LIKELY) == [("chat", 1)]
