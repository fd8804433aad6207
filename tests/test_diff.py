"""`pgeval diff`: the differing fingerprint keys of two runs; a warning when more than one
variable differs."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import make_run, make_testset

from evaluator.table import fingerprint as fpmod
from evaluator.table.config_diff import compare, flatten

BASE = {
    "fingerprint_version": 1,
    "server": {"version": "18.6", "version_num": 180006},
    "extensions": {"vector": "0.8.1"},
    "indexes": {"kb_hnsw": {"method": "hnsw", "options": {"m": "16", "ef_construction": "64"}}},
    "query_settings": {"hnsw.ef_search": "40", "hnsw.iterative_scan": "off"},
    "planner": {"work_mem": "4MB", "enable_off": []},
    "data": {"rows": 1400, "checksum": "00ff"},
    "filters": {},
    "testset": {"name": "kb-v1", "hash": "abc"},
    "info": {"captured_at": "2026-01-01T00:00:00+00:00"},
}


def variant(**changes):
    fp = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = fp
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1].replace("_DOT_", ".")] = value
    return fp


def test_one_variable_no_warning():
    d = compare(BASE, variant(query_settings__hnsw_DOT_ef_search="80"))
    assert [(x.key, x.a, x.b) for x in d.differences] == [
        ("query_settings.hnsw.ef_search", "40", "80")
    ]
    assert d.warnings() == []


def test_grouped_keys_are_one_variable():
    d = compare(BASE, variant(data={"rows": 1401, "checksum": "0100"}))
    assert len(d.differences) == 2 and d.variables == ["data"] and not d.warnings()
    d = compare(BASE, variant(server={"version": "18.7", "version_num": 180007}))
    assert d.variables == ["server"]
    gone = copy.deepcopy(BASE)
    gone["indexes"] = {}
    d = compare(BASE, gone)
    assert d.variables == ["indexes.kb_hnsw"] and not d.warnings()


def test_info_is_ignored_and_two_variables_warn():
    d = compare(BASE, variant(info={"captured_at": "later"}))
    assert not d.differences
    d = compare(
        BASE, variant(query_settings__hnsw_DOT_ef_search="80", indexes__kb_hnsw__options__m="32")
    )
    assert d.variables == ["indexes.kb_hnsw.options.m", "query_settings.hnsw.ef_search"]
    assert "2 variables differ" in d.warnings()[0]


def test_flatten_keeps_lists_whole():
    assert flatten({"a": {"b": [1, 2]}, "c": {}}) == {"a.b": [1, 2], "c": {}}
    assert flatten({"c": {}}, keep_empty=False) == {}


@pytest.fixture
def two_runs(clean):
    with clean.connect(autocommit=True) as c:
        make_testset(c, "dts", {"q1": {"d1": 1}})
        for name, fp in (
            ("ra", BASE),
            ("rb", variant(query_settings__hnsw_DOT_ef_search="80")),
            ("rc", variant(query_settings__hnsw_DOT_ef_search="80", planner__work_mem="64MB")),
            ("rnone", None),
        ):
            rid = make_run(c, name, "dts", {"q1": ["d1"]})
            if fp is not None:
                c.execute(
                    "UPDATE pgeval.run SET fingerprint = %s, config_hash = %s WHERE run_id = %s",
                    (json.dumps(fp), fpmod.config_hash(fp), rid),
                )
    return clean


def test_cli_diff(pgeval, two_runs):
    code, out, err = pgeval("diff", "ra", "rb")
    assert code == 0, err
    assert "query_settings.hnsw.ef_search" in out and "1 variable(s) differ" in out
    assert "warning" not in err
    code, out, err = pgeval("diff", "ra", "rc", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["variables"] == ["planner.work_mem", "query_settings.hnsw.ef_search"]
    assert "2 variables differ" in err
    code, out, err = pgeval("diff", "ra", "ra")
    assert code == 0 and "same configuration" in out
    code, out, err = pgeval("diff", "ra", "rnone")
    assert code == 0 and "no fingerprint recorded for rnone" in err
    code, out, err = pgeval("diff", "ra", "nope")
    assert code == 1 and "nope" in err
