"""No module of ``collector`` or ``evaluators`` is longer than 600 lines (one job per module)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
# Modules allowed past the limit, by name: none.
EXCEPTIONS: frozenset[str] = frozenset()


def too_long(root: Path, exceptions: frozenset[str] = EXCEPTIONS) -> list[str]:
    """``path: lines`` of each module under ``root``'s collector/ and evaluators/ past
    ``MAX_LINES``, but those in ``exceptions`` (paths relative to ``root``)."""
    found = []
    for package in ("collector", "evaluators"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES and name not in exceptions:
                found.append(f"{name}: {lines} lines")
    return found


def test_no_module_is_longer_than_600_lines() -> None:
    assert too_long(ROOT) == []


def test_the_check_sees_a_long_module_and_keeps_to_its_exceptions(tmp_path: Path) -> None:
    (tmp_path / "collector" / "sessions").mkdir(parents=True)
    (tmp_path / "evaluators").mkdir()
    (tmp_path / "collector" / "sessions" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "collector" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "evaluators" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(tmp_path, frozenset({"evaluators/long.py"})) == [
        f"collector/sessions/long.py: {MAX_LINES + 1} lines"
    ]
