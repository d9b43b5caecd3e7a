"""What one piece of prompt text holds for a session's scan, worked out once per text.

A session scans each piece of prompt text it has not read (a system prompt, the part of a
history its earlier spans did not record) for catalogs, message blocks and injected skill
bodies.  What a text holds depends on the text alone, and the same texts come back in every
session of an agent (its system prompt, its tool definitions, the catalog in them), so both
steps are kept per text:

- ``plan``: which of the three walks the raw text may need, by substring markers (a marker
  inside any decoded string is in the raw text too);
- ``contents``: the text decoded (JSON, or the text itself), its strings and blocks taken
  in one walk, and the injections among its strings.

Values are shared between sessions and must not be modified.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.detect import catalog_shapes, catalogs, transcript
from collector.detect.catalog_shapes import cued
from collector.detect.content import parse_json
from collector.detect.facts import blocks as block_facts
from collector.detect.facts import injections as injection_facts
from collector.detect.history_calls import may_load
from collector.detect.transcript import Injection, MessageCall, MessageResult
from evaluators.bytecache import memo_by_text
from evaluators.evidence import CatalogEntry

# Each catalog marker as it survives in raw (JSON) text, with the marker itself.
CATALOG_MARKERS: tuple[tuple[str, str], ...] = tuple(zip(catalogs.RAW_MARKERS, catalogs.MARKERS, strict=True))
# Substrings one of which a catalog by shape holds in raw (JSON) text: an item, a description, a tag.
SHAPE_RAW: tuple[str, ...] = ("\\n- ", "\n- ", "\\n* ", "\n* ", "escription", "name=")


def has_any(text: str, markers: tuple[str, ...] | list[str]) -> bool:
    for marker in markers:  # noqa: SIM110 - a loop, not any(): no generator made for every text
        if marker in text:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Plan:
    """Which walks a raw text may need: the catalog markers of the table it holds, whether
    it may hold a catalog by shape, message blocks, injected bodies."""

    catalog_markers: list[str]
    shaped_catalog: bool
    blocks: bool
    injections: bool


@memo_by_text("scan_plans", 4 * 1024 * 1024, value_factor=0.0)
def plan(raw: str) -> Plan:
    """What ``raw`` may hold, by its markers alone (no decoding)."""
    return Plan(
        [marker for in_raw, marker in CATALOG_MARKERS if in_raw in raw],
        catalog_shapes.cued(raw) and has_any(raw, SHAPE_RAW),
        has_any(raw, block_facts.BLOCK_MARKERS),
        has_any(raw, injection_facts.INJECTION_MARKERS),
    )


# What a candidate string of a text lists as a catalog, when no registry name is in the text:
# (shape, entries) to advertise, or None (read, and nothing to advertise).
Listing = tuple[str, list[CatalogEntry]] | None


class Contents:
    """A raw text decoded: its strings and message blocks, in document order, and the
    skill bodies injected among its strings.  What a session's scan takes from them that
    depends on the text alone (``catalogs``, ``loads``) is worked out on first request and
    kept with them."""

    __slots__ = ("_catalogs", "_loads", "blocks", "injections", "strings")

    def __init__(
        self, strings: list[str], blocks: list[MessageCall | MessageResult], injections: list[Injection]
    ) -> None:
        self.strings = strings
        self.blocks = blocks
        self.injections = injections
        self._catalogs: list[tuple[str, Listing, int]] | None = None
        self._loads: list[bool] | None = None

    def catalogs(self, markers: list[str]) -> list[tuple[str, Listing, int]]:
        """(string, what it lists, its ``catalog_digest``) of each string a session reads for a
        catalog when no name of the registry is in the text: those holding one of ``markers``
        (the raw text's ``Plan.catalog_markers``: the same on every call for one text) or
        saying "skill" (``catalog_shapes.cued``), in document order."""
        if self._catalogs is None:
            self._catalogs = [
                (text, listing(text, markers), catalog_digest(text))
                for text in self.strings
                if cued(text) or has_any(text, markers)
            ]
        return self._catalogs

    def loads(self) -> list[bool]:
        """For each of ``blocks``, whether it is a call that may load a skill
        (``history_calls.may_load``)."""
        if self._loads is None:
            self._loads = [isinstance(block, MessageCall) and may_load(block) for block in self.blocks]
        return self._loads


def catalog_digest(text: str) -> int:
    """How a session remembers that it read ``text`` for a catalog (its set of digests of
    text read): the hash of ("catalog", text), which never equals the bare text's."""
    return hash(("catalog", text))


def listing(text: str, markers: list[str]) -> Listing:
    """What one string of prompt text lists, without a registry: by a table's shape when it
    holds one of ``markers`` (``catalogs``), else by its shape alone (``catalog_shapes``)."""
    if has_any(text, markers):
        found = catalogs.find(text)
        if found is not None:
            return found
    if "\n" not in text and "\\n" in text:
        # One line with escaped line breaks (a repr of objects holding prompt text): its lines.
        text = text.replace("\\n", "\n")
    entries = catalog_shapes.find(text, ())
    return (catalog_shapes.SHAPE, entries) if entries else None


@memo_by_text("scan_contents", 16 * 1024 * 1024, value_factor=2.0)
def contents(raw: str) -> Contents:
    """``raw``'s strings, blocks and injections (JSON decoded, or the text itself)."""
    value = parse_json(raw)
    strings, found = transcript.strings_and_blocks(raw if value is None else value, True, True)
    injections = list(transcript.injections_in(strings)) if plan(raw).injections else []
    return Contents(strings, found, injections)


__all__ = [
    "CATALOG_MARKERS",
    "SHAPE_RAW",
    "Contents",
    "Listing",
    "Plan",
    "catalog_digest",
    "contents",
    "has_any",
    "listing",
    "plan",
]
