"""CI cannot pass with a prerequisite's tests skipped (issue 50, "A CI that says what it ran"):
with ``PGEVAL_REQUIRE`` naming it, a missing prerequisite fails its tests with the reason; without
it (a user's clone) the same tests skip with that reason. Run on a real test of the suite, with
Chromium hidden from ``PATH``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_output_width.py::test_advise_page_fits_1280_px_with_its_verdicts_and_hover"


def pytest_without_chromium(require: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PGEVAL_REQUIRE"}
    env["PATH"] = str(Path(sys.executable).parent)  # no /usr/bin: no chromium on PATH
    if require is not None:
        env["PGEVAL_REQUIRE"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_prerequisite_skips_on_a_clone_and_fails_in_ci():
    clone = pytest_without_chromium(None)
    assert clone.returncode == 0, clone.stdout + clone.stderr
    assert "1 skipped" in clone.stdout and "chromium is not installed" in clone.stdout

    for require in ("chromium", "pg15,chromium", "all"):
        ci = pytest_without_chromium(require)
        assert ci.returncode == 1, ci.stdout + ci.stderr
        assert "1 error" in ci.stdout, ci.stdout  # fails in its set-up, before any server starts
        assert "required prerequisite chromium is missing (PGEVAL_REQUIRE)" in ci.stdout
        assert "chromium is not installed" in ci.stdout

    other = pytest_without_chromium("pg15")  # CI requiring something else: still a skip
    assert other.returncode == 0 and "1 skipped" in other.stdout, other.stdout
