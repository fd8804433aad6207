"""Skips for what a machine may lack (Debian's PostgreSQL 15 with pgvector, PgBouncer, Chromium,
the en_US.UTF-8 locale, torch's CPU build with sentence-transformers) that CI turns into failures.

On a user's clone a missing prerequisite skips its tests with the reason. ``.ci/run`` installs
them all and sets ``PGEVAL_REQUIRE`` (a comma-separated list of the names below, or ``all``): a
prerequisite it names that is missing fails its tests with the same reason, so a failed install
cannot turn about 30 tests into skips and leave CI green.
"""

from __future__ import annotations

import os
import shutil

import pytest

NAMES = ("pg15", "pgbouncer", "chromium", "locale", "torch")


def required(name: str) -> bool:
    """True where CI said this prerequisite must be present (``PGEVAL_REQUIRE``)."""
    assert name in NAMES, name
    wanted = {w.strip() for w in os.environ.get("PGEVAL_REQUIRE", "").split(",") if w.strip()}
    return "all" in wanted or name in wanted


def mark(name: str, why: str | None) -> pytest.MarkDecorator:
    """A marker for a test needing ``name``: nothing when ``why`` is None (present), a skip with
    ``why`` on a user's clone, and in CI a failure with ``why`` (conftest's
    ``pytest_runtest_setup`` fails a test marked ``prerequisite_missing``)."""
    if why is None:
        return pytest.mark.skipif(False, reason="")
    if required(name):
        return pytest.mark.prerequisite_missing(name, why)
    return pytest.mark.skip(reason=why)


def skip(name: str, why: str) -> None:
    """Inside a test or fixture: skip with ``why``, or fail in CI."""
    if required(name):
        fail(name, why)
    pytest.skip(why)


def fail(name: str, why: str) -> None:
    pytest.fail(f"required prerequisite {name} is missing (PGEVAL_REQUIRE): {why}", pytrace=False)


def chromium_missing() -> str | None:
    """Why Debian's Chromium cannot be used, or None."""
    if not os.path.exists("/usr/bin/chromium") or shutil.which("chromium") is None:
        return "Debian's chromium is not installed (/usr/bin/chromium)"
    return None


def torch_missing() -> str | None:
    """Why the local embedder and cross-encoder tests cannot run (torch and sentence-transformers,
    ``pip install torch==2.13.0 '.[local]'``), or None."""
    import importlib.util

    for name in ("torch", "sentence_transformers"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (pip install torch==2.13.0 '.[local]')"
    return None
