"""One parser for ``--set GUC=VALUE`` (evaluator.stages.gucs.parse): `pgeval fingerprint`, `run
pipeline`, `sweep` and `warmup` read a setting the same way, so the same settings hash the same."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dba_data import ensure_table, ensure_target

from evaluator.stages import gucs

TABLE = "settings_parser_docs"


@pytest.fixture(scope="module")
def target(database):
    rng = np.random.default_rng(5)
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        ensure_table(c, TABLE, rng.normal(size=(50, 4)).astype(np.float32))
        c.execute(
            f"CREATE INDEX settings_parser_hnsw ON {TABLE} USING hnsw (embedding vector_cosine_ops)"
        )
        ensure_target(c, "settings-parser", TABLE)
    yield "settings-parser"
    with database.connect(autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")


def test_parse_normalises_names_and_refuses_bad_items():
    assert gucs.parse([" HNSW.EF_SEARCH = 40 "]) == {"hnsw.ef_search": "40"}
    for bad, msg in (
        ("hnsw.ef_search", "not GUC=VALUE"),
        ("=4", "not GUC=VALUE"),
        ("a b=1", "not a setting name"),
        ("transaction_read_only=off", "cannot be changed"),
    ):
        with pytest.raises(Exception, match=msg):
            gucs.parse([bad])
    with pytest.raises(Exception, match="given twice"):
        gucs.parse(["hnsw.ef_search=4", "HNSW.ef_search=5"])


def test_fingerprint_reads_a_setting_as_the_pipeline_does(pgeval, target):
    """`fingerprint --set HNSW.EF_SEARCH=40` is the configuration `run pipeline --set
    HNSW.EF_SEARCH=40` runs (the pipeline lower-cases names): same hash as the lower-case form."""
    hashes, settings = [], []
    for item in ("HNSW.EF_SEARCH=40", "hnsw.ef_search=40", "hnsw.ef_search = 40"):
        code, out, err = pgeval(
            "fingerprint", "--target", target, "--set", item, "--no-checksum", "--format", "json"
        )
        assert code == 0, err
        doc = json.loads(out)
        hashes.append(doc["config_hash"])
        settings.append(doc["fingerprint"]["query_settings"])
    assert len(set(hashes)) == 1, settings
    assert settings[0]["hnsw.ef_search"] == "40" and "HNSW.EF_SEARCH" not in settings[0]
    code, out, err = pgeval(
        "fingerprint", "--target", target, "--set", "hnsw.ef_search=4", "--set", "HNSW.EF_SEARCH=5"
    )
    assert code == 1 and "given twice" in err and "--set" in err
