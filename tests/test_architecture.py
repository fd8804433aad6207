"""The package's shape: every module imports, no import cycles, the layers in their order.

The import graph is read from the source (the AST), not from ``sys.modules``: an edge A -> B means
module A imports B anywhere in its source: at module level, inside a function, or under ``if
TYPE_CHECKING`` (a late import still ties the two modules together, so it counts). Importing
``evaluator.x.y`` also runs ``evaluator/x/__init__.py``, so that package is an edge too.
"""

from __future__ import annotations

import ast
import importlib
import re
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


def _base_of(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module an ``import from`` reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _targets(module: str, path: Path, node: ast.stmt) -> list[str]:
    """The evaluator modules an import statement names (``from pkg import mod`` names pkg.mod)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _base_of(module, path, node)
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


def _imports(module: str, path: Path, *, nested: bool = True) -> set[str]:
    """The modules ``module`` imports: all of them (``nested``, the default), or only those its
    module-level statements import when it is loaded."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = ast.walk(tree) if nested else _top_level(tree.body)
    deps: set[str] = set()
    for node in nodes:
        deps.update(_targets(module, path, node))
    return deps


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


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
    """No cycle among all imports, those inside functions included."""
    cycles = find_cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# The layers, bottom first: one entry per top-level folder of evaluator/ (tuning's own order, its
# sweeps below advise and watch, is a sub-entry beside it). A module belongs to the longest prefix
# listed; it may import its own layer and the layers below, never one above (inside a function
# neither). Packages on one line share a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("evaluator.core",),  # connections, install, canonical JSON, progress display, ...
    ("evaluator.testset",),  # test sets in; the Query a stage ranks for
    ("evaluator.providers",),  # embedders, rerankers, segmenters
    ("evaluator.kinds",),  # each stage kind described once (its runners, in stages/, named)
    ("evaluator.targets",),  # the user's table
    ("evaluator.captured",),  # the application's own queries, read from the server log
    ("evaluator.stages",),  # ranking, run storage
    ("evaluator.measure",),  # numbers read from SQL, a sweep's operating points among them
    ("evaluator.table",),  # table state: health, warm-up, fingerprint, data checksum, copies
    ("evaluator.ground_truth",),  # exact lists stored, refreshed from the data checksum's versions
    ("evaluator.run",),  # experiments (they record a fingerprint), resume, run files
    ("evaluator.reporting",),  # documents and gates (a report shows a run's sweep)
    ("evaluator.tuning",),  # a sweep runs pipelines; a captured set measured per shape
    # advise composes sweeps into a page a DBA signs; watch probes as a sweep, exposes metrics
    ("evaluator.tuning.advise", "evaluator.tuning.watch"),
    ("evaluator.api",),
    ("evaluator.cli",),
    ("evaluator.demo",),  # the tour runs the commands (cli/main.py names its command)
    ("evaluator.__main__",),  # runs the command line
)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the longest prefix that names ``module`` (None: the
    ``evaluator`` package itself, which holds only the version)."""
    best, found = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, found = len(name), i
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``A -> B`` for every import of a module from a layer above its own."""
    out = []
    for module, deps in sorted(graph.items()):
        own = layer_of(module)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if own is not None and theirs is not None and theirs > own:
                out.append(f"{module} -> {dep}")
    return out


def folder_of(module: str) -> str | None:
    """The top-level folder (or module) of evaluator/ that holds ``module`` (None: the
    ``evaluator`` package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def folder_rank(folder: str) -> int | None:
    """The folder's place in :data:`LAYERS`: the first entry naming it or a module in it."""
    return next(
        (i for i, names in enumerate(LAYERS) for n in names if folder_of(n) == folder), None
    )


def folder_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, str]]:
    """The import graph collapsed to the top-level folders of evaluator/: folder -> {the folder
    it imports: one import that makes the arrow, as ``module -> module``}."""
    out: dict[str, dict[str, str]] = {}
    for module, deps in sorted(graph.items()):
        a = folder_of(module)
        for dep in sorted(deps):
            b = folder_of(dep)
            if a and b and a != b:
                out.setdefault(a, {}).setdefault(b, f"{module} -> {dep}")
    return out


def upward_folders(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b (module -> module)`` for every folder ``a`` that imports a folder ``b`` placed
    above it in :data:`LAYERS` (a folder placed nowhere counts as above every other)."""
    top = len(LAYERS)
    return [
        f"{a} -> {b} ({why})"
        for a, deps in sorted(folder_graph(graph).items())
        for b, why in sorted(deps.items())
        if (folder_rank(b) if folder_rank(b) is not None else top)
        >= (folder_rank(a) if folder_rank(a) is not None else top)
    ]


def misplaced_folders(layers: tuple[tuple[str, ...], ...], modules) -> list[str]:
    """What keeps ``layers`` from giving each top-level folder of ``modules`` one place: an entry
    naming two folders, a folder whose entries do not follow each other, a folder with none."""
    out, order = [], []
    for names in layers:
        folders = sorted({folder_of(n) or "" for n in names})
        out += [f"one entry, two folders: {', '.join(folders)}"] if len(folders) > 1 else []
        order += [] if order and order[-1] == folders[0] else folders[:1]
    out += [f"{f} in two places" for f in sorted({f for f in order if order.count(f) > 1})]
    placed = {n for names in layers for n in names}
    wanted = sorted({folder_of(m) for m in modules} - {None} - {folder_of(n) for n in placed})
    return out + [f"{f} has no place" for f in wanted]


def test_each_folder_is_one_layer():
    """Each entry of :data:`LAYERS` names modules of one top-level folder, each folder's entries
    follow each other (the folder sits in one place in the order), and every folder of
    evaluator/ has its place."""
    assert misplaced_folders(LAYERS, MODULES) == []


def test_folder_places_check_can_fail():
    layers = (
        ("evaluator.core",),
        ("evaluator.run", "evaluator.table"),
        ("evaluator.tuning",),
        ("evaluator.api",),
        ("evaluator.tuning.advise",),
    )
    modules = ["evaluator", "evaluator.core.db", "evaluator.run.x", "evaluator.cli.main"]
    assert misplaced_folders(layers, modules) == [
        "one entry, two folders: run, table",
        "tuning in two places",
        "cli has no place",
    ]


def test_no_folder_imports_a_folder_above_it():
    """Drawn as folders and import arrows (issue 46, item 5), every arrow points down: no folder
    of evaluator/ imports one above it in :data:`LAYERS`, inside a function neither; so the
    folders' graph has no cycle."""
    up = upward_folders(GRAPH)
    assert not up, "folders importing a folder above: " + "; ".join(up)
    graph = {a: set(deps) for a, deps in folder_graph(GRAPH).items()}
    assert find_cycles(graph) == []


def test_folder_check_can_fail():
    """The check itself: table/ importing run/, reporting/ importing tuning/'s sweep package and
    core/ importing a folder LAYERS does not place are reported; arrows down (run/ importing
    table/, a folder importing core/) and inside a folder are not."""
    graph = {
        "evaluator.table.fingerprint": {"evaluator.run.pipeline", "evaluator.core.db"},
        "evaluator.run.pipeline": {"evaluator.table.fingerprint", "evaluator.run.resume"},
        "evaluator.reporting.extras": {"evaluator.tuning.sweep", "evaluator.measure.metrics"},
        "evaluator.nowhere.x": {"evaluator.core.db"},
        "evaluator.core.db": {"evaluator.nowhere.x"},
    }
    assert upward_folders(graph) == [
        "core -> nowhere (evaluator.core.db -> evaluator.nowhere.x)",
        "reporting -> tuning (evaluator.reporting.extras -> evaluator.tuning.sweep)",
        "table -> run (evaluator.table.fingerprint -> evaluator.run.pipeline)",
    ]
    assert folder_graph(graph)["run"] == {
        "table": "evaluator.run.pipeline -> evaluator.table.fingerprint"
    }


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "evaluator" and layer_of(m) is None] == []


def test_no_upward_imports():
    """No module imports a layer above its own, inside functions neither: what a lower layer
    needs from above it is passed down as a callback (progress, reopen, import_file)."""
    up = upward_imports(GRAPH)
    assert not up, "imports from a layer above: " + "; ".join(up)


def test_layer_check_can_fail():
    """The check itself: an import from stages into run, one from core into cli (inside a
    function, as the reader sees it) and one from a sweep into advise are reported."""
    graph = {
        "evaluator.stages.store": {"evaluator.run.resume", "evaluator.core.db"},
        "evaluator.core.x": {"evaluator.cli.output"},
        "evaluator.targets.catalog": {"evaluator.kinds.registry"},
        "evaluator.tuning.sweep.x": {"evaluator.tuning.advise.run", "evaluator.tuning.spent"},
    }
    assert upward_imports(graph) == [
        "evaluator.core.x -> evaluator.cli.output",
        "evaluator.stages.store -> evaluator.run.resume",
        "evaluator.tuning.sweep.x -> evaluator.tuning.advise.run",
    ]
    assert layer_of("evaluator.tuning.sweep.runner") > layer_of("evaluator.run.pipeline")
    assert layer_of("evaluator.table.fingerprint") < layer_of("evaluator.run.pipeline")


def test_function_level_imports_are_read(tmp_path):
    """An import inside a function (and under TYPE_CHECKING) is an edge; the module-level reading
    leaves it out."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from evaluator.targets import targets\n"
        "def f():\n    from evaluator.run import resume\n",
        encoding="utf-8",
    )
    deps = _imports("evaluator.stages.m", src)
    assert {"evaluator.run.resume", "evaluator.targets.targets"} <= deps
    assert _imports("evaluator.stages.m", src, nested=False) == set()


def test_cycle_finder_finds_a_cycle():
    """The check itself can fail: a graph with a cycle is reported, named."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_reads_relative_imports():
    """The graph sees the edges it is meant to (a check on the reader, not on the package)."""
    deps = _imports("evaluator.testset.fields", MODULES["evaluator.testset.fields"], nested=False)
    assert "evaluator.core.ids" in deps and "evaluator.core.text" in deps
    # importing testset.catalog from outside runs testset/__init__ too
    assert "evaluator.testset" in _imports(
        "evaluator.run.runs", MODULES["evaluator.run.runs"], nested=False
    )
    cli = _imports("evaluator.cli", MODULES["evaluator.cli"], nested=False)
    assert "evaluator.cli.main" in cli


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("evaluator.core")))
def test_core_imports_nothing_above_it(module):
    """core/ is the bottom layer: none of its imports (module level or inside a function) reaches
    another package of evaluator."""
    deps = GRAPH[module]
    above = sorted(d for d in deps if d != "evaluator" and not d.startswith("evaluator.core"))
    assert not above, f"{module} imports {', '.join(above)}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _named_attr(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(object, attribute) of ``obj.attr`` and of ``getattr/setattr/hasattr(obj, "attr")``."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "setattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None


def _members(tree: ast.Module) -> set[str]:
    """The attributes a module's objects carry: methods and class variables of its classes,
    attributes it assigns (``x.attr = ...``, ``setattr(x, "attr", ...)``)."""
    out: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            targets = getattr(stmt, "targets", None) or [getattr(stmt, "target", None)]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
            out.update([stmt.name] if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) else [])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
            found = _named_attr(node)
            out.update([found[1]] if found else [])
    return out


TREES = {m: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for m, p in MODULES.items()}
MEMBERS = {m: _members(t) for m, t in TREES.items()}


def _outside_private(module: str, imported: str) -> bool:
    """``imported`` (a module's dotted name) has a private part (``pkg._mod``) whose package
    ``module`` is not in: a private module is its package's own."""
    parts = imported.split(".")
    return any(
        _private(part) and not module.startswith(".".join(parts[:i]) + ".")
        for i, part in enumerate(parts)
    )


def private_crossings(module: str, path: Path, tree: ast.Module, members: dict) -> list[str]:
    """Where ``module`` uses a private name (``_x``) of another evaluator module: ``from m
    import _x``, ``m._x`` on an imported module, ``obj._x`` / ``getattr(obj, "_x")`` of an
    attribute this module does not define but another does, a private module outside its
    package (a module's own private names are read only through ``m._x``)."""
    out, bound = [], {}
    elsewhere = {n for m, names in members.items() if m != module for n in names if _private(n)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _base_of(module, path, node)
            if not base.startswith("evaluator"):
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                bound.update({a.asname or a.name: full} if full in MODULES else {})
                private_name = _private(a.name) and full not in MODULES
                if private_name or _outside_private(module, full if full in MODULES else base):
                    out.append(f"{module}:{node.lineno} from {base} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("evaluator."):
                    bound[a.asname or a.name] = a.name
                    if _outside_private(module, a.name):
                        out.append(f"{module}:{node.lineno} import {a.name}")
    here = members.get(module, set())
    for node in ast.walk(tree):
        found = _named_attr(node)
        if found is None or not _private(found[1]):
            continue
        obj, attr = found
        name = obj.id if isinstance(obj, ast.Name) else ast.unparse(obj)
        if (
            name in bound
            or name in bound.values()
            or (name not in ("self", "cls") and attr not in here and attr in elsewhere)
        ):
            out.append(f"{module}:{node.lineno} {ast.unparse(obj)}.{attr}")
    return out


def test_no_private_name_crosses_modules():
    """A module uses only the public names of another (no exception list): what a neighbour
    needs is given a public name, or a small function taking what it needs."""
    crossings = [c for m, p in MODULES.items() for c in private_crossings(m, p, TREES[m], MEMBERS)]
    assert not crossings, "private names used from another module: " + "; ".join(crossings)


def test_private_name_check_can_fail(tmp_path):
    """The check itself: an imported private function, a module's private attribute, another
    module's private method and a private module outside its package are reported."""
    src = tmp_path / "m.py"
    src.write_text(
        "from evaluator.run.pipeline import _x\n"
        "from evaluator.api._keywords import query_source\n"
        "from evaluator.api import _keywords\n"
        "import evaluator.api._keywords\n"
        "from evaluator.ground_truth import exact_scan\n"
        "def f(stage, conn):\n"
        "    conn._mine = 1\n"
        "    return exact_scan._y, stage._z(), getattr(stage, '_z'), conn._mine, self._w\n",
        encoding="utf-8",
    )
    tree = ast.parse(src.read_text(encoding="utf-8"))
    members = {"evaluator.measure.m": _members(tree), "evaluator.stages.other": {"_z", "_w"}}
    assert private_crossings("evaluator.measure.m", src, tree, members) == [
        "evaluator.measure.m:1 from evaluator.run.pipeline import _x",
        "evaluator.measure.m:2 from evaluator.api._keywords import query_source",
        "evaluator.measure.m:3 from evaluator.api import _keywords",
        "evaluator.measure.m:4 import evaluator.api._keywords",
        "evaluator.measure.m:8 exact_scan._y",
        "evaluator.measure.m:8 stage._z",
        "evaluator.measure.m:8 stage._z",
    ]
    # inside its package a private module is the package's own
    assert private_crossings("evaluator.api.runs", src, ast.parse(src.read_text()), {}) == [
        "evaluator.api.runs:1 from evaluator.run.pipeline import _x",
        "evaluator.api.runs:8 exact_scan._y",
    ]


def _sources_containing(text: str) -> list[str]:
    return sorted(
        str(p.relative_to(ROOT.parent))
        for p in ROOT.rglob("*.py")
        if text in p.read_text(encoding="utf-8")
    )


def test_one_place_reads_the_index_catalog():
    """pg_index is read in targets/introspect.py only; the rest call it."""
    assert _sources_containing("pg_index") == ["evaluator/targets/introspect.py"]


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


# a comparison with a tolerance subtracted or added (``recall >= target - 1e-12``), or the
# reach tolerance defined: the reach rule written out
REACH_RULE = re.compile(r"[<>]=?[^<>=\n]*[-+]\s*(?:1e-12|REACH_TOLERANCE)\b|REACH_TOLERANCE\s*=")


SWEEP = "evaluator.tuning.sweep"
# what the rest of pgeval may import of the sweep package: the measuring session (opened,
# reopened, run), a sweep's configuration, its points and result, and their views; its storage
# and set-up (store, setup, measuring, remeasure, context, snapshot, consistency, runner, ...) are
# reached only through the session
SWEEP_PUBLIC = {
    "session", "config", "configure", "result", "grid", "groups", "text", "plot", "scan_modes",
    "shapes",
}  # fmt: skip


def sweep_internals(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> module`` for each module of the sweep package outside :data:`SWEEP_PUBLIC`
    imported from outside the package."""
    inside = (SWEEP, SWEEP + ".")
    return sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if not (m == SWEEP or m.startswith(inside[1]))
        for d in deps
        if d.startswith(inside[1]) and d[len(inside[1]) :].split(".")[0] not in SWEEP_PUBLIC
    )


def test_one_measuring_path():
    """Everything outside tuning/sweep/ measures through ``session.Session`` (open, run, reopen,
    measure_again): none imports the sweep's storage or set-up modules (docs/ARCHITECTURE.md,
    "The measuring session")."""
    assert sweep_internals(GRAPH) == []
    assert all(f"{SWEEP}.{name}" in MODULES for name in SWEEP_PUBLIC)


def test_measuring_path_check_can_fail():
    graph = {
        "evaluator.tuning.watch.x": {f"{SWEEP}.store", f"{SWEEP}.session", SWEEP},
        f"{SWEEP}.session": {f"{SWEEP}.store"},
    }
    assert sweep_internals(graph) == [f"evaluator.tuning.watch.x -> {SWEEP}.store"]


def test_the_reach_rule_is_written_once():
    """A target is reached by one rule with one tolerance: in Python,
    measure/operating_points.py (``reaches``, ``REACH_TOLERANCE``), in SQL, sql/016_reaches.sql
    (``pgeval.reaches``, ``pgeval.reach_tolerance``); every other place calls them
    (tests/test_operating_points.py keeps the two tolerances equal)."""
    python = sorted(
        str(p.relative_to(ROOT.parent))
        for p in ROOT.rglob("*.py")
        if REACH_RULE.search(p.read_text(encoding="utf-8"))
    )
    assert python == ["evaluator/measure/operating_points.py"]
    code = {  # (comments left out: they may name the tolerance)
        p.name: re.sub(r"--[^\n]*", "", p.read_text(encoding="utf-8"))
        for p in (ROOT.parent / "sql").glob("*.sql")
    }
    assert sorted(name for name, text in code.items() if "1e-12" in text) == ["016_reaches.sql"]
    assert REACH_RULE.search("recall >= target - 1e-12")  # (the pattern can fail)


def test_stage_kinds_described_once():
    """Stage kinds are described in kinds/registry.py (role, access method, settings, build
    options); no other module lists them by hand."""
    for listing in (
        '("hnsw", "ivfflat", "diskann")',
        '["hnsw", "ivfflat", "diskann"]',
        '("exact", "hnsw", "ivfflat", "diskann")',
        '"hnsw": ("m", "ef_construction")',
        '"hnsw": {"m": "16"',
        "hnsw, ivfflat",
        "ivfflat, diskann",
        "hnsw-bq, ivfflat",
        "hnsw|ivfflat",
    ):
        assert _sources_containing(listing) == [], listing
    assert _sources_containing("index_method=") == ["evaluator/kinds/registry.py"]
    assert _sources_containing('method = "hnsw"') == []


def test_docs_list_the_registrys_kinds():
    """The docs that list kinds list the registry's: docs/index-designs.md has a row per ANN
    kind, docs/TIMING.md's row of the vector stages names every vector kind (the help texts
    and docs/cli.md are generated from the registry)."""
    from evaluator.kinds import registry

    docs = ROOT.parent / "docs"
    designs = (docs / "index-designs.md").read_text(encoding="utf-8")
    assert [n for n in registry.ann_kinds() if f"\n| `{n}` |" not in designs] == []
    timing = (docs / "TIMING.md").read_text(encoding="utf-8")
    assert f"\n| {registry.listing(registry.vector_kinds())} |" in timing


def test_searched_types_described_once():
    """What differs between the types a column is searched as (vector, halfvec, bit: operator,
    operator class, quantizer, re-ranking) is read from core/search_types.py; what advise needs
    of a kind (its iterative scan's modes, its re-rank candidates) from the registry."""
    assert _sources_containing('== "bit"') == []
    assert _sources_containing('"binary_quantize"') == ["evaluator/core/search_types.py"]
    assert [p for p in _sources_containing('"strict_order"') if "/advise/" in p] == []
    assert [p for p in _sources_containing('"bq.candidates"') if "/advise/" in p] == []


def test_registry_describes_every_kind_consistently():
    """Every registered kind has a known role and a runner whose ``kind`` is its name; every ANN
    kind names its access method and settings, and its runner reads them from the registry."""
    from evaluator.kinds import registry

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
    # the ANN kinds are the registry's, in its order; every one has its module and its test
    assert registry.ann_kinds() == tuple(n for n, k in registry.KINDS.items() if k.role == "ann")
    tests = ROOT.parent / "tests"
    for name in registry.ann_kinds():
        runner = registry.KINDS[name].runner.split(":")[0]
        assert runner in MODULES, name
        plain = registry.KINDS[name].index_method == name
        assert plain or (tests / f"test_stage_{name.replace('-', '_')}.py").exists(), name


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
    deps = GRAPH[module]
    up = sorted(d for d in deps if d == "evaluator.cli" or d.startswith("evaluator.cli."))
    assert not up, f"{module} imports {', '.join(up)}"


def _flag_declarations(source: str) -> list[str]:
    """The flags ``source`` declares: the ``--flag`` strings (each spelling of ``--a/--no-a``)
    given to ``click.option(...)`` or ``opt(...)`` (``cli/option_groups.py``)."""
    flags = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in ("option", "opt", "Option"):
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                flags.extend(f for f in arg.value.split("/") if f.startswith("--"))
    return flags


def test_each_cli_flag_is_declared_once():
    """A flag two commands take is declared once, in cli/flags.py (or in the one command that
    takes it; the demo's command is demo/command.py); a command gives it its own help or default
    with ``FLAG.but(...)``, never a second ``click.option`` (issue 46: 34 flags were declared up
    to seven times)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "cli").rglob("*.py")) + [ROOT / "demo" / "command.py"]:
        for flag in _flag_declarations(path.read_text(encoding="utf-8")):
            seen.setdefault(flag, []).append(path.relative_to(ROOT).as_posix())
    assert len(seen) > 100  # the walk read the commands
    twice = {flag: where for flag, where in seen.items() if len(where) > 1}
    assert not twice, f"flags declared more than once: {twice}"


def test_flag_counter_sees_both_spellings():
    source = (
        'click.option("--k", type=int)\nopt("--k")\nFLAG.but(help="x")\n'
        '@click.option("--diskann/--no-diskann")\ndef f(): pass\n'
    )
    assert sorted(_flag_declarations(source)) == ["--diskann", "--k", "--k", "--no-diskann"]


def _string_keyed_writes(tree: ast.AST, module: str) -> list[str]:
    """``x["key"] = ...`` (or ``+=``, annotated), ``x.update(key=...)``, ``x.update({"key": ...})``
    and ``x.setdefault("key", ...)``: a dict written with string keys."""

    def keyed(node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    out = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Subscript) and keyed(sub.slice):
                    out.append(f"{module}:{node.lineno} {ast.unparse(t)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "setdefault")
        ):
            first = node.args[0] if node.args else None
            literal = isinstance(first, ast.Dict) and any(
                k is not None and keyed(k) for k in first.keys
            )
            if node.keywords or literal or (first is not None and keyed(first)):
                out.append(f"{module}:{node.lineno} {ast.unparse(node.func)}")
    return out


def test_advise_writes_no_dict_with_string_keys():
    """advise's values are typed (tuning/advise/outcome.py): each step returns a new frozen value
    (``dataclasses.replace``); no module of the advise package writes a key into a dict (a
    dict literal, as ``Outcome.as_dict`` builds the JSON row, is not a write)."""
    found = [
        w
        for m, p in MODULES.items()
        if m.startswith("evaluator.tuning.advise.")
        for w in _string_keyed_writes(TREES[m], m)
    ]
    assert not found, "string-keyed writes in the advise package: " + "; ".join(found)


def test_string_keyed_write_check_can_fail():
    src = (
        "row['a'] = 1\nrow['b'] += 1\nx: int\nrow.update(c=1)\nrow.update({'d': 1})\n"
        "row.setdefault('e', [])\nper.setdefault(kind, [])\nrow[key] = 1\nout = {'f': 1}\n"
    )
    found = _string_keyed_writes(ast.parse(src), "m")
    assert [w.split(" ")[0] for w in found] == ["m:1", "m:2", "m:4", "m:5", "m:6"]
