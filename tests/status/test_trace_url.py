"""``status.trace_url``: a template with ``{trace_id}``, checked when the config is read."""

from __future__ import annotations

import re

import pytest

from collector.config import ConfigError, parse


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("https://jaeger.example/trace", "status.trace_url: the template has no {trace_id}"),
        ("javascript:alert(1)//{trace_id}", "status.trace_url: must be an http:// or https:// URL"),
        ("/explore?trace={trace_id}", "status.trace_url: must be an http:// or https:// URL"),
    ],
)
def test_a_template_the_pages_cannot_use_is_a_config_error(template: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse({"status": {"trace_url": template}})


def test_the_trace_id_goes_where_the_template_says_and_no_template_links_nothing() -> None:
    status = parse({"status": {"trace_url": "https://jaeger.example/trace/{trace_id}?uiEmbed=v0"}}).status
    assert status.trace_link("4bf92f3577b34da6a3ce929d0e0e4736") == (
        "https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?uiEmbed=v0"
    )
    assert parse({}).status.trace_link("4bf92f3577b34da6a3ce929d0e0e4736") is None
