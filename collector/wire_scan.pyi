"""Types of the C module ``collector/wire_scan.c`` (see its doc)."""

from collections.abc import Mapping, Sequence
from typing import Any

PREFIXED: int  # flags: a key with a declared prefix was found
UNDECODED: int  # flags: a value (or event field) is left as its encoded AnyValue bytes

class Scanner:
    def __init__(
        self,
        span_keys: Sequence[str],
        resource_keys: Sequence[str],
        prefixes: Sequence[str],
        event_fields: Mapping[str, Sequence[str]],
    ) -> None: ...
    def spans(
        self, request: bytes | bytearray | memoryview
    ) -> (
        tuple[
            list[dict[str, Any] | None],
            list[
                tuple[int, bytes, bytes, dict[str, Any] | None, int, list[tuple[int, str, str, Any]] | None]
            ],
        ]
        | None
    ):
        """(each ResourceSpans' declared resource attributes, every span as (its ResourceSpans'
        position, trace_id, span_id, declared attributes, flags, declared event fields)), or
        None for input protobuf must judge.  Values are str, or encoded AnyValue bytes."""

class Markers:
    """Which groups of ASCII marker substrings a str holds, in one pass."""

    def __init__(self, groups: tuple[tuple[str, ...], ...]) -> None: ...
    def found(self, text: str) -> int:
        """Bit g set when ``text`` holds a marker of ``groups[g]``."""
