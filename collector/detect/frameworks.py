"""Which framework a session's telemetry comes from.

``known``: the table's names (``framework_facts.FRAMEWORK_SCOPES``, ``framework_facts.FRAMEWORK_SERVICES``), by
instrumentation scope, then by the resource's ``service.name``.  ``by_shape``: for a harness
no row names, what its telemetry calls itself: the instrumentation scope (past an
instrumentation library's prefix, ``framework_facts.INSTRUMENTATION_PREFIXES``: ``<prefix>acme`` is
``acme``), else ``service.name``, else the SDK or distribution the resource names
(``telemetry.sdk.name``, ``telemetry.distro.name``), else a dotted span name's first part.
A session is ``unknown`` only when none of them names anything.
"""

from __future__ import annotations

import re

from collector.detect.facts import frameworks as framework_facts
from evaluators.bytecache import ByteCache, register, text_bytes

_known_cache: ByteCache[tuple[str, str], str] = register(ByteCache("frameworks", 1024 * 1024))
_shape_cache: ByteCache[tuple[str, str, str, str], str] = register(ByteCache("framework_shapes", 1024 * 1024))

# Names that name no framework: SDK defaults, placeholders, languages, conventions.
_NO_NAME: frozenset[str] = frozenset(
    {
        "",
        "unknown",
        "unknown_service",
        "opentelemetry",
        "otel",
        "default",
        "tracer",
        "logger",
        "main",
        "__main__",
        "root",
        "app",
        "application",
        "service",
        "python",
        "node",
        "nodejs",
        "js",
        "java",
        "go",
        "rust",
        "dotnet",
        "sdk",
        "telemetry",
        "instrumentation",
        "test",
    }
)
# GenAI semconv operation names, which open span names and name no framework.
_OPERATIONS: frozenset[str] = frozenset(
    {
        "chat",
        "text_completion",
        "generate_content",
        "embeddings",
        "execute_tool",
        "invoke_agent",
        "create_agent",
    }
)
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_SDK_KEYS: tuple[str, ...] = ("telemetry.distro.name", "telemetry.sdk.name")


def known(scope: str, service: str = "") -> str:
    """The framework the table names by scope, else by service name, else ""."""
    found = _known_cache.get((scope, service), None)
    if found is None:
        found = framework_facts.FRAMEWORK_SCOPE_NAMES.get(scope) or next(
            (fw for prefix, fw in framework_facts.FRAMEWORK_SCOPES if scope.startswith(prefix)), ""
        )
        if not found and service:
            found = next(
                (fw for prefix, fw in framework_facts.FRAMEWORK_SERVICES if service.startswith(prefix)), ""
            )
        _known_cache.put((scope, service), found, text_bytes(scope) + text_bytes(service))
    return found


def by_shape(scope: str, service: str = "", sdk: str = "", span_name: str = "") -> str:
    """The name the telemetry gives itself, normalised (``a-b.c`` -> ``a_b``), or ""."""
    key = (scope, service, sdk, span_name)
    found = _shape_cache.get(key, None)
    if found is None:
        found = (
            _scope_name(scope)
            or _normalised(service.split(":", 1)[0])
            or _normalised(sdk)
            or _span_name(span_name)
        )
        _shape_cache.put(key, found, sum(text_bytes(part) for part in key))
    return found


def sdk_keys() -> tuple[str, ...]:
    """Resource attributes naming an SDK or distribution, first present wins."""
    return _SDK_KEYS


def _scope_name(scope: str) -> str:
    for prefix in framework_facts.INSTRUMENTATION_PREFIXES:
        if scope.startswith(prefix):
            return _normalised(scope[len(prefix) :].split(".", 1)[0])
    return _normalised(scope.lstrip("@").split("/", 1)[0].split(".", 1)[0])


def _span_name(name: str) -> str:
    first = name.split(" ", 1)[0]
    if "." not in first or first in _OPERATIONS:
        return ""
    return _normalised(first.split(".", 1)[0])


def _normalised(name: str) -> str:
    folded = _NOT_NAME.sub("_", name.casefold()).strip("_")
    return "" if folded in _NO_NAME or folded.isdigit() else folded
