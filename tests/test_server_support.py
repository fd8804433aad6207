"""Which stage kinds the server can run (stages/server_support.py): the extension each kind
needs, at its least version. On the embedded server every ANN kind can run; an older pgvector
is refused for the kinds that search halfvec or bit (tests/test_pg15.py: a server without
pgvectorscale)."""

from __future__ import annotations

import pytest

from evaluator.kinds import registry
from evaluator.stages.server_support import missing, version_tuple


@pytest.mark.parametrize(
    "text, parsed",
    [("0.8.1", (0, 8, 1)), ("0.7.0-dev", (0, 7, 0)), ("0.10", (0, 10)), ("1.2.3rc1", (1, 2, 3))],
)
def test_versions_compare_as_numbers(text, parsed):
    assert version_tuple(text) == parsed
    assert version_tuple("0.10.0") > version_tuple("0.7.0") > version_tuple("0.6.2")


def test_every_ann_kind_runs_on_the_embedded_server(database):
    with database.connect(results=False) as kb:
        for name in registry.ann_kinds():
            assert missing(kb, name) is None, name


def test_a_kind_needs_its_minimum_version(database):
    """The same rule, asked with a minimum above what the server has: pgvector's version is read
    from pg_extension and compared as numbers."""
    from dataclasses import replace

    saved = registry.KINDS["hnsw-bq"]
    registry.KINDS["hnsw-bq"] = replace(saved, min_version="99.0.0")
    try:
        with database.connect(results=False) as kb:
            why = missing(kb, "hnsw-bq")
            have = kb.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            version = have.fetchone()[0]
    finally:
        registry.KINDS["hnsw-bq"] = saved
    assert why is not None and "needs pgvector 99.0.0 or newer" in why and version in why
