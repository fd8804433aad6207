"""One canonical JSON and one content hash (evaluator/core/canonical.py) serve every hash pgeval
stores; each keeps the spelling it was first stored with, so nothing stored is invalidated."""

from __future__ import annotations

import hashlib
import json

from test_architecture import _sources_containing

from evaluator.core.canonical import canonical_json, sha256_hex

VALUE = {"b": [1, 2.5, None], "a": {"é": "ü", "z": True}, "path": object}


def _old(value, **kw) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str, **kw).encode()).hexdigest()


def test_each_stored_hash_keeps_its_spelling():
    from evaluator.ground_truth import store as ground_truth
    from evaluator.table import data_checksum, fingerprint
    from evaluator.tuning.sweep import runner

    compact = {"separators": (",", ":")}
    # ground-truth slots: non-ASCII escaped
    assert ground_truth._slot(VALUE) == _old(VALUE, **compact)
    # fingerprints and checksum cache keys: UTF-8 as it is
    assert data_checksum._key(VALUE) == _old(VALUE, ensure_ascii=False, **compact)
    fp = {**VALUE, "info": {"captured_at": "now"}}
    assert fingerprint.config_hash(fp) == _old(VALUE, ensure_ascii=False, **compact)
    # a sweep's default name: json's default separators
    identity = {"target": "kb", "stage": "hnsw", "grid": {"é": [1]}}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    assert runner.default_name(identity) == f"sweep-kb-hnsw-{key}"


def test_canonical_json_is_key_order_free():
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1}) == '{"a":1,"b":2}'
    assert sha256_hex({"a": 1, "b": 2}) == sha256_hex({"b": 2, "a": 1})


def test_no_other_module_hashes_json_itself():
    assert _sources_containing("sha256(json.dumps") == []
    assert _sources_containing("hexdigest()") == [
        "evaluator/core/canonical.py",
        "evaluator/providers/embedders/static.py",  # a model file's bytes, not JSON
        "evaluator/testset/query_source.py",  # streamed content hashes (HASH_VERSION)
        "evaluator/testset/store.py",
    ]


def test_one_vector_literal():
    """pgvector's text form of a vector is written in one place (evaluator/core/vector_literal.py),
    and reads back the same float32 numbers."""
    assert _sources_containing('"[" + ",".join') == ["evaluator/core/vector_literal.py"]


def test_vector_literal_round_trips_float32(conn):
    import numpy as np

    from evaluator.core.vector_literal import vector_literal

    v = np.random.default_rng(3).normal(size=16).astype(np.float32)
    back = conn.execute("SELECT %s::vector::real[]", (vector_literal(v),)).fetchone()[0]
    assert np.array_equal(np.asarray(back, dtype=np.float32), v)


def test_one_no_such_run_message():
    """'no run named' is said in one place (evaluator/measure/run_lookup.py)."""
    assert _sources_containing("no run named") == ["evaluator/measure/run_lookup.py"]
