"""No function in evaluator/ is longer than 100 lines (issue 22): a long function is split into
named helpers. The allow-list below holds the functions of files that other work is rewriting
right now (the sweep); it only shrinks: an entry may not grow, and an entry
that is no longer needed fails the test until it is removed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 100

# "path:function" -> its length today (a function may shrink below it, never grow past it)
ALLOWED: dict[str, int] = {}


def long_functions(root: Path = ROOT / "evaluator", limit: int = MAX_LINES) -> dict[str, int]:
    """``path:function`` -> lines, for every function (methods and nested functions too) longer
    than ``limit`` lines, decorators left out."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out[f"{path.relative_to(root.parent).as_posix()}:{node.name}"] = lines
    return out


def test_no_function_over_100_lines():
    found = long_functions()
    new = {f: n for f, n in found.items() if f not in ALLOWED}
    assert not new, f"functions over {MAX_LINES} lines (split them into named helpers): {new}"
    grown = {f: n for f, n in found.items() if f in ALLOWED and n > ALLOWED[f]}
    assert not grown, f"allow-listed functions grew: {grown}"
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"no longer over {MAX_LINES} lines, remove from ALLOWED: {stale}"


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    found = long_functions(tmp_path)
    assert list(found.values()) == [MAX_LINES + 1]
    assert list(found)[0].endswith("m.py:long")


MAX_LAYER_MODULE_LINES = 500  # issue 35: a module of table/ or tuning/ is read on a few screens


def long_modules(
    root: Path = ROOT / "evaluator", limit: int = MAX_LAYER_MODULE_LINES, under=("table", "tuning")
) -> dict:
    """``path`` -> lines, for every module under ``root``'s folders ``under`` (every module
    under ``root`` when ``under`` is empty) longer than ``limit`` lines."""
    out = {}
    for folder in [root / u for u in under] or [root]:
        for path in sorted(folder.rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                out[path.relative_to(root.parent).as_posix()] = lines
    return out


def test_no_table_or_tuning_module_over_500_lines():
    found = long_modules()
    assert not found, f"modules of table/, tuning/ over {MAX_LAYER_MODULE_LINES} lines: {found}"


def test_the_check_finds_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n")
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LAYER_MODULE_LINES + 1))
    assert list(long_modules(tmp_path, under=()).values()) == [MAX_LAYER_MODULE_LINES + 1]
