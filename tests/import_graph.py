"""Print the import graph of ``collector/`` and ``evaluators/``, and check its rules.

    python tests/import_graph.py          # every module and what it imports; the rule check
    python tests/import_graph.py --check  # the rule check only (exit 1 on a violation)

Rules: no import cycle; ``evaluators`` never imports ``collector``, and ``evaluators.judge``
imports nothing of ``evaluators`` outside itself; the components
(receiver, spool, sessions, detect, evaluate, export, status, state, otlp) import no module
above them (``collector.config``, ``collector.service``, ``collector.cli``,
``collector.replay``); only ``collector.service`` (and the commands that run it) builds the
whole flow; the database layer (``collector.db``) imports no stage: nothing of ``collector``
outside itself; the store (``collector.state``) imports no stage (receiver, spool, sessions,
detect, evaluate, export, status): the stages use it, never the other way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("collector", "evaluators")
# What sits above the components: composing the whole, or running it.
ABOVE = frozenset({"collector.config", "collector.service", "collector.cli", "collector.replay", "collector.__main__"})
# The stages of the flow: what the store (``collector.state``) never imports.
STAGES = frozenset({"receiver", "spool", "sessions", "detect", "evaluate", "export", "status"})
COMPONENTS = ("receiver", "spool", "sessions", "detect", "evaluate", "export", "status", "state", "otlp")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def graph() -> dict[str, set[str]]:
    """module -> the modules of both packages it imports (at any depth of its code)."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    # The recursion limit is the process's: raised for this walk only, then put back, so a
    # test run in the same process afterwards sees the limit it would see alone.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def violations(edges: dict[str, set[str]]) -> list[str]:
    found = [f"import cycle: {' -> '.join(c)}" for c in cycles(edges)]
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if module.startswith("evaluators") and target.startswith("collector"):
                found.append(f"{module} imports {target}: evaluators never imports collector")
            if module.startswith("evaluators.judge") and not target.startswith("evaluators.judge"):
                found.append(f"{module} imports {target}: the judge package imports only itself")
            component = module.split(".")[1] if module.count(".") >= 1 else ""
            if module.startswith("collector.") and component in COMPONENTS and target in ABOVE:
                found.append(f"{module} imports {target}: a component imports nothing above it")
            if component == "db" and target.startswith("collector") and not target.startswith("collector.db"):
                found.append(f"{module} imports {target}: the database layer imports no stage")
            if component == "state" and target.split(".")[1:2] and target.split(".")[1] in STAGES:
                found.append(f"{module} imports {target}: the store imports no stage")
    return found


def main() -> int:
    edges = graph()
    if "--check" not in sys.argv:
        for module, targets in sorted(edges.items()):
            print(f"{module}: {', '.join(sorted(targets)) or '-'}")
        print()
    problems = violations(edges)
    for problem in problems:
        print(problem)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
