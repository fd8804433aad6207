"""`pgeval demo` runs the whole flow on the embedded server and cleans up after itself."""

import numpy as np

from evaluator.demo.corpus import embed, generate


def test_corpus_is_deterministic_and_graded():
    a, b = generate(n_queries=12), generate(n_queries=12)
    assert a.chunks == b.chunks and a.queries == b.queries
    assert np.allclose(a.vectors, b.vectors)
    assert all(set(q["relevant"].values()) <= {1, 2, 3} for q in a.queries)
    assert abs(float(np.linalg.norm(embed("refund money days", 64))) - 1.0) < 1e-6


def test_demo_end_to_end(pgeval, conn):
    code, out, err = pgeval("demo", "--queries", "20")
    assert code == 0, err
    for text in ("$ pgeval run pipeline", "loss attribution", "recall@10", "by query type"):
        assert text in out
    stages = {r[0] for r in conn.execute(
        "SELECT r.stage FROM pgeval.run r JOIN pgeval.experiment e USING (experiment_id) "
        "WHERE e.name LIKE 'demo-%'")}
    assert {"exact", "hnsw", "diskann", "bm25", "merge"} <= stages
    assert conn.execute("SELECT to_regclass('pgeval_demo.chunks')").fetchone()[0] is None
