"""The house's rules, read from the source (no imports run): no import circles in ``rl_system/``,
``envs/`` or ``bench/``, no arrow from the algorithms or the collective up into the rooms that drive
them, none from bench's measuring room into its publishing room (``bench.publish``), and no module
of ``rl_system/`` or ``bench/`` over 400 lines (past that it holds two roles)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"rl_system": REPO / "rl_system", "rl_system.envs": REPO / "envs", "bench": REPO / "bench"}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for the library, its envs (installed as ``rl_system.envs``) and
    the benchmarks."""
    found = {}
    for package, root in ROOTS.items():
        for path in root.rglob("*.py"):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of ours that ``name`` is or lies in (``rl_system.run.loop.RunLoop`` -> its module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """Our modules that ``module`` imports anywhere: in functions too (a lazy import that closes a
    circle is still a circle) and under ``if TYPE_CHECKING`` (a type that two modules need of each
    other says they hold one role between them, or that the type belongs elsewhere)."""
    path = MODULES[module]
    return imports_in(path.read_text(), module, path.name == "__init__.py")


def imports_in(source: str, module: str, is_package: bool = False) -> set[str]:
    """:func:`imports_of` for the source text of ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    stack = list(ast.parse(source).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            out.update(t for a in node.names if (t := _owner(a.name)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else _owner(base)
                if target:
                    out.add(target)
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    out.discard(module)
    return out


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circles():
    graph = {m: imports_of(m) for m in MODULES}
    assert import_circles(graph) == []


def test_a_circle_planted_in_bench_is_found():
    """Two publishing modules that import each other (as the figures once did) are a circle."""
    graph = {m: imports_of(m) for m in MODULES}
    graph["bench.publish.figures_results"] = graph["bench.publish.figures_results"] | {"bench.publish.figures_marl"}
    assert ["bench.publish.figures_marl", "bench.publish.figures_results"] in import_circles(graph)


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_lazy_relative_and_type_checking_imports_are_all_edges():
    source = """
from typing import TYPE_CHECKING
from . import loop
from ..rollout.contract import RolloutMeta
if TYPE_CHECKING:
    from rl_system.api import Policy
def later():
    import rl_system.config
    from rl_system.run.loop import RunLoop
"""
    assert imports_in(source, "rl_system.run.collect") == {
        "rl_system.run.loop", "rl_system.rollout.contract", "rl_system.config", "rl_system.api"}
    assert "rl_system.api" in imports_of("rl_system")  # rl_system.__getattr__ imports the API lazily


UPPER_ROOMS = ("actors", "run", "cli", "api", "tuning", "observe", "policy", "checkpoint")
"""The rooms that drive training: the algorithms and the collective sit below them."""


def _room(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


@pytest.mark.parametrize("room", ["rl_system.algos", "rl_system.collective"])
def test_the_algorithms_and_the_collective_import_no_room_above_them(room):
    upward = sorted(f"{m} -> {t}" for m in MODULES if m == room or m.startswith(room + ".")
                    for t in imports_of(m) if _room(t) in UPPER_ROOMS)
    assert not upward, "an arrow runs back up:\n" + "\n".join(upward)


def test_the_measuring_room_of_bench_imports_nothing_from_the_publishing_room():
    """The suites, peers and harness write results; the pages and figures read them (and may run
    a suite): never the other way."""
    measuring = [m for m in MODULES if m.startswith("bench.") and not m.startswith("bench.publish")]
    upward = sorted(f"{m} -> {t}" for m in measuring for t in imports_of(m) if t.startswith("bench.publish"))
    assert not upward, "the measuring room reaches into publishing:\n" + "\n".join(upward)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("rl_system.envs")))
def test_no_module_over_400_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(REPO)} has {lines} lines: split it by role"
