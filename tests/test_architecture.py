"""The package's shape: every module imports, no import cycles, core at the bottom.

The import graph is read from the source (the AST), not from ``sys.modules``: an edge A -> B means
module A imports B at module level (imports inside functions are deliberate late bindings and do
not count). Importing ``evaluator.x.y`` also runs ``evaluator/x/__init__.py``, so that package is
an edge too.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "evaluator"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _targets(module: str, path: Path, node: ast.stmt) -> list[str]:
    """The evaluator modules an import statement names (``from pkg import mod`` names pkg.mod)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module if path.name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            if node.module:
                base = f"{base}.{node.module}"
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    else:
        return []
    out = []
    for name in names:
        # the module itself and every package above it run on import
        parts = name.split(".")
        for i in range(2, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in MODULES and prefix != module and not module.startswith(prefix + "."):
                out.append(prefix)
    return out


def _imports(module: str, path: Path, *, nested: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = ast.walk(tree) if nested else _top_level(tree.body)
    deps: set[str] = set()
    for node in nodes:
        deps.update(_targets(module, path, node))
    return deps


def _top_level(body):
    """Module-level statements, including those under if/try (e.g. ``if TYPE_CHECKING``: no,
    those never run, so they are skipped)."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            continue
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
            for h in getattr(node, "handlers", []):
                yield from _top_level(h.body)
            yield from _top_level(getattr(node, "finalbody", []))


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a cycle path
    A -> B -> ... -> A through the component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in comps:  # one concrete cycle through the component, for the message
        start = min(comp)
        path, seen = [start], {start}
        while True:
            nxt = sorted(w for w in graph[path[-1]] if w in comp)
            back = [w for w in nxt if w == start]
            if back and len(path) > 1 or not [w for w in nxt if w not in seen]:
                path.append(start)
                break
            w = [w for w in nxt if w not in seen][0]
            path.append(w)
            seen.add(w)
        cycles.append(path)
    return cycles


def test_every_module_imports():
    for name in MODULES:
        if name != "evaluator.__main__":  # runs the command line
            importlib.import_module(name)


def test_no_import_cycles():
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_cycle():
    """The check itself can fail: a graph with a cycle is reported, named."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_reads_relative_imports():
    """The graph sees the edges it is meant to (a check on the reader, not on the package)."""
    deps = _imports("evaluator.testset.fields", MODULES["evaluator.testset.fields"])
    assert "evaluator.core.ids" in deps and "evaluator.core.text" in deps
    # importing testset.catalog from outside runs testset/__init__ too
    assert "evaluator.testset" in _imports("evaluator.run.runs", MODULES["evaluator.run.runs"])
    cli = _imports("evaluator.cli", MODULES["evaluator.cli"])
    assert "evaluator.cli.main" in cli


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("evaluator.core")))
def test_core_imports_nothing_above_it(module):
    """core/ is the bottom layer: none of its imports (module level or inside a function) reaches
    another package of evaluator."""
    deps = _imports(module, MODULES[module], nested=True)
    above = sorted(d for d in deps if d != "evaluator" and not d.startswith("evaluator.core"))
    assert not above, f"{module} imports {', '.join(above)}"


def _sources_containing(text: str) -> list[str]:
    return sorted(
        str(p.relative_to(ROOT.parent))
        for p in ROOT.rglob("*.py")
        if text in p.read_text(encoding="utf-8")
    )


def test_one_place_reads_the_index_catalog():
    """pg_index is read in target/introspect.py only; the rest call it."""
    assert _sources_containing("pg_index") == ["evaluator/target/introspect.py"]


def test_one_test_set_lookup():
    """A test set is resolved by name (with the one NotFound message) in testset/catalog.py only;
    the load (which locks the row) and the experiment's post-mortem (which must not raise) read
    it their own way."""
    assert _sources_containing("no test set named") == ["evaluator/testset/catalog.py"]
    assert _sources_containing("FROM pgeval.testset WHERE name") == [
        "evaluator/run/experiment_scope.py",
        "evaluator/testset/catalog.py",
        "evaluator/testset/store.py",
    ]


def test_stage_kinds_described_once():
    """Stage kinds are described in stages/registry.py (role, access method, settings, build
    options); no other module lists them by hand."""
    for listing in (
        '("hnsw", "ivfflat", "diskann")',
        '["hnsw", "ivfflat", "diskann"]',
        '("exact", "hnsw", "ivfflat", "diskann")',
        '"hnsw": ("m", "ef_construction")',
        '"hnsw": {"m": "16"',
    ):
        assert _sources_containing(listing) == [], listing
    assert _sources_containing("index_method=") == ["evaluator/stages/registry.py"]
    assert _sources_containing('method = "hnsw"') == []


def test_registry_describes_every_kind_consistently():
    """Every registered kind has a known role and a runner whose ``kind`` is its name; every ANN
    kind names its access method and settings, and its runner reads them from the registry."""
    from evaluator.stages import registry

    for name, kind in registry.KINDS.items():
        assert kind.role in registry.ROLES, name
        runner = registry.get(name)
        if kind.runner.startswith("evaluator.stages.service:"):
            continue  # the service presets share kind "service" and record their role per run
        assert runner.kind == name and runner.role == kind.role
        if kind.ann:
            assert kind.index_method and kind.guc_prefixes and kind.work_settings, name
            assert runner.method == kind.index_method
            assert runner.guc_prefixes == kind.guc_prefixes
            assert all(s.startswith(kind.guc_prefixes) for s in kind.work_settings)
    assert registry.ann_kinds() == ("hnsw", "hnsw-halfvec", "hnsw-bq", "ivfflat", "diskann")


@pytest.mark.parametrize(
    "module",
    sorted(
        m
        for m in MODULES
        if not m.startswith(("evaluator.cli", "evaluator.demo"))
        and m not in ("evaluator", "evaluator.__main__")
    ),
)
def test_nothing_below_the_cli_imports_it(module):
    """cli/ is the top layer (the demo, which runs its commands, sits beside it): no module below
    imports it, not even inside a function (the progress display and the JSON text live in
    core/)."""
    deps = _imports(module, MODULES[module], nested=True)
    up = sorted(d for d in deps if d == "evaluator.cli" or d.startswith("evaluator.cli."))
    assert not up, f"{module} imports {', '.join(up)}"
