"""The test suite cleans up after itself: the session's embedded server directory (225 MB) and
the fuzzers' files are removed at the end (a pytest run in a subprocess, TMPDIR of its own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_test_run_leaves_no_temporary_directories():
    tmp = Path(tempfile.mkdtemp(prefix="pgc-"))  # short: the server's socket lives below it
    try:
        env = {k: v for k, v in os.environ.items() if k != "PGEVAL_DATADIR"}
        env["TMPDIR"] = str(tmp)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "-p",
                "no:cacheprovider",
                "--basetemp",
                str(tmp / "basetemp"),
                "tests/test_db.py::test_connection_error_names_no_password",
                "tests/test_testset_fuzz.py::test_random_bytes",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "2 passed" in run.stdout
        left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("pgeval-"))
        assert left == [], left
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
