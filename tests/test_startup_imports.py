"""A command pays only for what it uses (docs/development.md, "Start-up"): `pgeval --help`, every
`pgeval CMD --help` and `pgeval testset list` import neither Alembic, SQLAlchemy, numpy nor
matplotlib; help connects to nothing, so it imports no psycopg and no pgserver either; a command
finds the embedded server without pgserver and checks the schema's revision with one SELECT.

Each check runs in a new interpreter (``python -c`` or ``python -X importtime -m evaluator``):
what this test process has imported says nothing about a command's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from robust_kb import dsn, fresh_database

ROOT = Path(__file__).resolve().parent.parent
NEVER = ("alembic", "sqlalchemy", "numpy", "matplotlib")  # no command but init and upgrades
HELP_NEVER = (*NEVER, "psycopg", "pgvector", "pgserver", "psutil")  # help connects to nothing


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    return env


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def _imported_by(*argv: str, **env: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """The top-level packages `python -m evaluator ARGV` imports (from ``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "evaluator", *argv],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "click" in names, done.stderr[-2000:]  # the trace was read
    return names, done


def _command_paths() -> list[list[str]]:
    from evaluator.cli.main import COMMANDS, cli

    ctx = click.Context(cli)
    paths: list[list[str]] = []
    for name in sorted(COMMANDS):
        command = cli.get_command(ctx, name)
        paths.append([name])
        if isinstance(command, click.Group):
            paths += [[name, sub] for sub in sorted(command.commands)]
    return paths


# Imports the entry point, then runs `--help` and every `CMD --help` in turn, in one interpreter:
# after each, the modules of HELP_NEVER it has imported (what one help imports, all of them
# imported together: none is a stronger check than one process per command)
_HELP_PATHS = """
import io, json, sys, contextlib
never, paths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def loaded():
    return sorted({m.split(".")[0] for m in sys.modules} & set(never))
from evaluator.cli import main
found = {"import evaluator.cli": loaded()}
for path in paths:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main([*path, "--help"])
    assert code == 0 and "Usage:" in out.getvalue(), (path, code)
    found[" ".join(["pgeval", *path, "--help"])] = loaded()
print(json.dumps(found))
"""


def test_no_help_imports_the_database_libraries():
    paths = [[], *_command_paths()]
    assert len(paths) > 30  # every command and subcommand
    done = _python(_HELP_PATHS, json.dumps(HELP_NEVER), json.dumps(paths))
    found = json.loads(done.stdout)
    assert len(found) == len(paths) + 1
    offending = {step: names for step, names in found.items() if names}
    assert not offending, f"imported before or by --help: {offending}"


def test_python_m_evaluator_help_imports_neither():
    names, done = _imported_by("--help")
    assert done.returncode == 0 and "Usage: pgeval" in done.stdout
    assert not names & set(HELP_NEVER), sorted(names & set(HELP_NEVER))


def test_testset_list_imports_no_alembic_sqlalchemy_numpy_nor_pgserver(database, clean):
    """On the embedded server, found through PGEVAL_DATADIR (postmaster.pid, not pgserver), and
    through a DSN: psycopg only."""
    for argv in (["testset", "list"], ["--dsn", database.uri(), "testset", "list"]):
        names, done = _imported_by(*argv, PGEVAL_DATADIR=str(database.datadir))
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith("no test sets"), done.stdout
        assert "psycopg" in names
        unwanted = names & {*NEVER, "pgserver", "psutil"}
        assert not unwanted, f"pgeval {' '.join(argv)} imported {sorted(unwanted)}"


def test_schema_errors_need_no_alembic(database, conn):
    """A command on a database without schema pgeval says so, as before, without importing
    Alembic or SQLAlchemy for it."""
    fresh_database(conn, "pgeval_startup_bare")
    try:
        bare = dsn(database, dbname="pgeval_startup_bare")
        names, done = _imported_by("--dsn", bare, "testset", "list")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines()[-1] == (
            "pgeval: error: schema pgeval is not installed in this database: run `pgeval init`"
        )
        assert not names & set(NEVER), sorted(names & set(NEVER))
    finally:
        conn.execute("DROP DATABASE IF EXISTS pgeval_startup_bare WITH (FORCE)")


class _Counting:
    """A connection that counts the statements sent through it."""

    def __init__(self, conn) -> None:
        self._conn, self.statements = conn, []

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def execute(self, query, *args, **kwargs):
        self.statements.append(query)
        return self._conn.execute(query, *args, **kwargs)


@pytest.mark.parametrize("autocommit", [True, False])
def test_the_schema_check_is_one_select(database, autocommit):
    from evaluator.core.install import HEAD_REVISION, current_revision, ensure_installed

    with database.connect(autocommit=autocommit) as c:
        counting = _Counting(c)
        ensure_installed(counting)
        assert current_revision(counting) == HEAD_REVISION
        assert counting.statements == ["SELECT version_num FROM pgeval.alembic_version"] * 2


def test_vocabulary_names_all_resolve():
    """api.vocabulary loads its names on first read: every listed name resolves, and nothing
    else does."""
    from evaluator.api import vocabulary

    assert set(vocabulary.__all__) == set(vocabulary._SOURCES)
    for name in vocabulary.__all__:
        assert getattr(vocabulary, name) is not None, name
    with pytest.raises(AttributeError):
        vocabulary.no_such_name  # noqa: B018
    import evaluator.testset as testset

    for name in testset.__all__:
        assert getattr(testset, name) is not None, name
