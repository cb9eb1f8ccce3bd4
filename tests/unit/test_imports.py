"""No import cycle among the repository's modules, across packages too.

import-linter's ``acyclic_siblings`` contract (``pyproject.toml``) checks each package's
children; a cycle through two top-level packages (``localcluster`` and ``tools``, say) is
between no siblings, so this test looks at the whole graph, module by module, with grimp
(import-linter's own graph). Imports inside functions count; imports under
``if TYPE_CHECKING:`` do not (never executed), as in the contracts.
"""

from __future__ import annotations

from pathlib import Path

import grimp

ROOTS = ("shared", "operators", "localcluster", "tools", "tests")
REPOSITORY = Path(__file__).resolve().parents[2]


def cycles(graph: grimp.ImportGraph, modules: list[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.find_modules_directly_imported_by(succ)))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
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
                        found.append(sorted(component))
    return found


def path_within(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One cycle through the component's first module, as ``a -> b -> a``."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for succ in sorted(graph.find_modules_directly_imported_by(node) & members):
                if succ == start:
                    path, step = [], node
                    while step != start:
                        path.append(step)
                        step = previous[step]
                    return " -> ".join([start, *reversed(path), start])
                if succ not in previous:
                    previous[succ] = node
                    nxt.append(succ)
        frontier = nxt
    return " <-> ".join(component)


def test_no_module_is_part_of_an_import_cycle(monkeypatch):
    monkeypatch.syspath_prepend(str(REPOSITORY))
    graph = grimp.build_graph(*ROOTS, include_external_packages=False, exclude_type_checking_imports=True)
    ours = sorted(m for m in graph.modules if m.partition(".")[0] in ROOTS)
    found = cycles(graph, ours)
    assert not found, "import cycles:\n" + "\n".join(path_within(graph, c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e2")]:
        graph.add_import(importer=importer, imported=imported)
    found = cycles(graph, sorted(graph.modules))
    assert found == [["a", "b", "c"]]
    assert path_within(graph, found[0]) == "a -> b -> c -> a"
