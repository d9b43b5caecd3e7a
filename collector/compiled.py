"""Which modules this install runs compiled to C by mypyc (the hot path; see pyproject.toml).

A compiled module is imported instead of the source file beside it, so in an editable
install an edit takes effect only once the install is rebuilt: ``stale`` finds the ones not.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

_PACKAGES = (Path(__file__).parent, Path(__file__).parent.parent / "evaluators")
_SUFFIXES = tuple(EXTENSION_SUFFIXES)


def compiled() -> list[Path]:
    """The compiled modules of ``collector`` and ``evaluators``."""
    return sorted(
        path for package in _PACKAGES for path in package.rglob("*.*") if path.name.endswith(_SUFFIXES)
    )


def stale() -> list[Path]:
    """Sources changed after their module was compiled: what runs is not what the file says."""
    found = []
    for path in compiled():
        for suffix in (".py", ".c"):  # mypyc's modules, and the C scanner
            source = path.with_name(path.name.split(".", 1)[0] + suffix)
            if source.exists() and source.stat().st_mtime > path.stat().st_mtime:
                found.append(source)
    return found
