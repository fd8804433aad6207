"""The built wheel carries the SQL API and the migrations; every command is documented."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_sql_and_migrations(tmp_path):
    pytest.importorskip("hatchling")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("pgeval-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in sorted((ROOT / "sql").glob("*.sql")):
        assert f"evaluator/sql/{sql.name}" in names
    assert "evaluator/migrations/env.py" in names
    for version in (ROOT / "migrations" / "versions").glob("*.py"):
        assert f"evaluator/migrations/versions/{version.name}" in names
    assert "evaluator/cli/main.py" in names
    for data in (
        "cran.all.1400.gz",
        "cran.qry.gz",
        "cranqrel.gz",
        "minilm/documents.npy.gz",
        "minilm/queries.npy.gz",
    ):  # `pgeval demo`'s collection
        assert f"evaluator/demo/data/cranfield/{data}" in names
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "pgeval = evaluator.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


def test_every_command_is_documented_in_readme():
    from evaluator.cli import COMMANDS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if not re.search(rf"pgeval {re.escape(name)}\b", readme)]
    assert not missing, f"commands missing from README.md: {missing}"


def test_every_command_has_help(pgeval):
    from evaluator.cli import COMMANDS

    for name in COMMANDS:
        code, out, err = pgeval(name, "--help")
        assert code == 0, (name, err)
        assert "Usage: pgeval" in out and len(out) > 200, name
