"""The command line is a front end over ``evaluator.api``: no module of
``evaluator/cli/commands`` imports the library's use-case packages (run, table, tuning, measure,
reporting, targets, stages, testset, providers, demo), not even inside a function. A command parses its
options, calls one method of :class:`evaluator.api.Pgeval` and prints what it returns."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "evaluator"
COMMANDS = ROOT / "cli" / "commands"
ALLOWED = (
    "evaluator.api",
    "evaluator.core",
    "evaluator.cli",
)
# command modules that still import around the API (empty: every command goes through it)
NOT_YET: set[str] = set()


def _imported(path: Path) -> set[str]:
    """Every evaluator module ``path`` imports, at module level or inside a function."""
    module = "evaluator.cli.commands." + path.stem
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("evaluator"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.rsplit(".", node.level)[0]
                name = f"{base}.{node.module}" if node.module else base
                out.update([name] if node.module else [f"{base}.{a.name}" for a in node.names])
            elif (node.module or "").startswith("evaluator"):
                out.add(str(node.module))
    return out


def _command_modules() -> list[Path]:
    return sorted(p for p in COMMANDS.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", _command_modules(), ids=lambda p: p.stem)
def test_command_modules_import_only_the_api_core_and_cli(path):
    around = sorted(
        m for m in _imported(path) if not any(m == a or m.startswith(a + ".") for a in ALLOWED)
    )
    if path.stem in NOT_YET:
        assert around, f"{path.stem} goes through evaluator.api now: take it off NOT_YET"
        return
    assert not around, f"{path.name} imports around evaluator.api: {around}"


def test_the_checker_sees_imports_around_the_api(tmp_path):
    """The check itself: relative and absolute imports, at module level and in a function."""
    probe = tmp_path / "probe_cmd.py"
    probe.write_text(
        "from ...run.runs import list_runs\n"
        "def f():\n    from ...table import health\n    import evaluator.stages.gucs\n"
        "from ...api import Pgeval\nfrom ...core.errors import InputError\nfrom ..output import emit\n"
        "from .common import pass_api\n"
    )
    assert _imported(probe) == {
        "evaluator.run.runs",
        "evaluator.table",
        "evaluator.stages.gucs",
        "evaluator.api",
        "evaluator.core.errors",
        "evaluator.cli.output",
        "evaluator.cli.commands.common",
    }


def test_every_command_reaches_the_api():
    """Each module that defines a command calls the API (``pass_api`` or ``Pgeval``), except
    ``db`` (it manages the embedded server: evaluator.core.server; ``demo``, the tour that runs
    the commands themselves, is evaluator/demo/command.py, above the CLI)."""
    core_only = {"db_cmd"}
    for path in _command_modules():
        text = path.read_text(encoding="utf-8")
        if "@click.command" not in text and ".command(" not in text:
            continue
        if path.stem in core_only:
            continue
        assert "pass_api" in text or "Pgeval(" in text, path.name


def test_one_mapping_spells_parameters_as_options():
    """The library names parameters; the command line's one mapping spells them as its options,
    the API as its parameters; a switch given as False is its --no- option."""
    from evaluator.cli.options import option_for
    from evaluator.core.errors import InputError, param

    exc = InputError(
        f"{param('null_true')} needs {param('where')}; or {param('replace', True)}, "
        f"{param('checksum', False)}, {param('settings')}",
        field=param("null_true"),
    )
    assert exc.field == "null_true"
    assert str(exc) == (
        "field 'null_true': `null_true` needs `where`; or `replace=True`, `checksum=False`, "
        "`settings`"
    )
    assert exc.text(option_for) == (
        "field '--null-as-true': --null-as-true needs --where; or --replace, --no-checksum, --set"
    )


def test_api_errors_of_new_parameters_name_them(clean):
    """add_target takes every option of `target add`; its errors name the API's parameters and
    the command line's options for the same mistake."""
    from evaluator import api
    from evaluator.core.errors import InputError

    pg = api.Pgeval(clean)
    with pytest.raises(InputError) as info:
        pg.add_target(
            "t", table="x", id_column="id", vector_column="e", null_true="enabled", where={}
        )
    assert info.value.field == "null_true" and "`where`" in str(info.value)
    assert "--" not in str(info.value)
    with pytest.raises(InputError) as info:
        pg.add_target("t", table="x", id_column="id", vector_column="e", knowledge_id="k1")
    assert info.value.field == "knowledge_id" and "goes with `preset` weknora" in str(info.value)


def test_cli_error_names_the_option(clean, pgeval):
    code, _, err = pgeval(
        "target", "add", "t", "--table", "x", "--id-column", "id", "--vector-column", "e",
        "--null-as-true", "enabled",
    )  # fmt: skip
    assert code == 1
    assert "field '--null-as-true': column 'enabled' has no --where filter" in err
