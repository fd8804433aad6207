"""A stage report from Python, on the embedded server: what

    pgeval testset load ex-cases.jsonl --name ex
    pgeval target add ex --table ex_docs --id-column id --vector-column embedding
    pgeval run pipeline --testset ex --target ex --stages exact,hnsw \
        --set hnsw.ef_search=10 --set enable_seqscan=off --depth 20 --repeat 2 --name ex-ef10
    pgeval stage-report ex-ef10

prints, done with ``evaluator.api`` and read as Python objects. Run it with
``python docs/examples/stage_report.py`` (it starts the embedded server when no DSN is set, and
creates a small table ``ex_docs`` of seeded random vectors with an HNSW index). Then compare with
``pgeval stage-report ex-ef10``: the same figures.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import evaluator.api as pgeval

TABLE, DIM, N_DOCS, N_QUERIES = "ex_docs", 16, 400, 40


def make_knowledge_base(pg: pgeval.Pgeval, folder: Path, seed: int = 7) -> Path:
    """The table ``ex_docs`` (id, embedding) with an HNSW index, and a test set file whose queries
    carry their embeddings and judge their 5 exact nearest neighbours relevant."""
    rng = random.Random(seed)
    docs = {str(i): [rng.gauss(0, 1) for _ in range(DIM)] for i in range(1, N_DOCS + 1)}
    with pg.database.connect(results=False, autocommit=True) as kb:
        kb.execute(f"DROP TABLE IF EXISTS {TABLE}")
        kb.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, embedding vector({DIM}))")
        with kb.cursor().copy(f"COPY {TABLE} (id, embedding) FROM STDIN") as copy:
            for doc_id, v in docs.items():
                copy.write_row((doc_id, "[" + ",".join(map(repr, v)) + "]"))
        kb.execute(f"CREATE INDEX ON {TABLE} USING hnsw (embedding vector_cosine_ops) "
                   "WITH (m = 4, ef_construction = 8)")
        kb.execute(f"ANALYZE {TABLE}")

    def cosine(a, b):
        dot = sum(x * y for x, y in zip(a, b))
        return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)

    path = Path(folder) / "ex-cases.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for q in range(1, N_QUERIES + 1):
            emb = [x + rng.gauss(0, 0.3) for x in docs[str(rng.randint(1, N_DOCS))]]
            near = sorted(docs, key=lambda d: -cosine(emb, docs[d]))[:5]
            fh.write(json.dumps({"id": f"q{q}", "query": f"query {q}", "embedding": emb,
                                 "relevant": {d: 3 - min(i, 2) for i, d in enumerate(near)}})
                     + "\n")
    return path


def run_experiment(pg: pgeval.Pgeval, folder: Path, name: str = "ex-ef10") -> str:
    """Test set (its file written in ``folder``), target, pipeline: the experiment's name."""
    cases = make_knowledge_base(pg, folder)
    pg.load_testset(cases, "ex", replace=True)
    pg.add_target("ex", table=TABLE, id_column="id", vector_column="embedding", replace=True)
    res = pg.run_pipeline("ex", "exact,hnsw", target="ex", depth=20, repeat=2, name=name,
                          settings={"hnsw.ef_search": 10, "enable_seqscan": "off"})
    return res.experiment


def show(report) -> None:
    """The report's main figures, as `pgeval stage-report` shows them."""
    e, c = report.experiment, report.counts
    print(f"experiment {e.name} · test set {e.testset} · status {e.status}")
    print(f"queries {c['queries']}: valid {c['valid']}")
    for s in report.stages:
        recall = s["metrics"][f"recall@{report.k}"]["mean"]
        index_recall = (s.get(f"index_recall@{report.k}") or {}).get("mean")
        print(f"  {s['stage']:<6} recall@{report.k} {recall:.4f}  index_recall@{report.k} "
              f"{'—' if index_recall is None else f'{index_recall:.4f}'}")
    for r in report.loss:
        print(f"  lost to {r['category']:<9} {r['chunks']} chunks ({r['recall_points']:.4f} "
              f"recall points)")


if __name__ == "__main__":
    pg = pgeval.connect()          # PGEVAL_DSN / PG* variables, else the embedded server
    pg.init()
    with tempfile.TemporaryDirectory() as folder:
        experiment = run_experiment(pg, Path(folder))
    show(pg.stage_report(experiment))
    print(f"compare: pgeval stage-report {experiment}")
