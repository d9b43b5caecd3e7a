"""Does ``skillgauge replay`` print the same records as another commit, on every recording?

    python tests/replay_compare.py --base <commit>

Checks the commit out into a temporary worktree, replays each recorded scenario (the files
its ``expected.json`` names, and each framework folder whole) with both that commit's code
and the working tree's, and prints every record that differs.  Exits 1 if any does.  Needs
the project's dependencies installed (``pip install -e .``); no judge is configured, so the
records are deterministic.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = Path("tests/fixtures/frameworks")


def cases() -> list[tuple[str, list[str]]]:
    """(name, files relative to the repository) for every scenario and framework folder."""
    found = []
    for expected in sorted((ROOT / FRAMEWORKS).glob("*/expected.json")):
        folder = expected.parent.relative_to(ROOT)
        for name, scenario in json.loads(expected.read_text())["scenarios"].items():
            found.append((f"{folder.name}/{name}", [str(folder / f) for f in scenario["files"]]))
        found.append((f"{folder.name}/*", [str(folder)]))
    return found


def replay(tree: Path, files: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    done = subprocess.run(
        [sys.executable, "-m", "collector", "replay", "--format", "json", *files],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return [f"exit {done.returncode}: {done.stderr.strip()}"]
    return done.stdout.splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare the working tree with")
    args = parser.parse_args()
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for name, files in cases():
                before, after = replay(base, files), replay(ROOT, files)
                if before == after:
                    print(f"same  {name}: {len(after)} records")
                    continue
                differ += 1
                print(f"DIFF  {name}")
                sys.stdout.writelines(
                    f"      {line}\n" for line in difflib.unified_diff(before, after, "base", "now", lineterm="")
                )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    print(f"{len(cases()) - differ} of {len(cases())} cases print the same records")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
