"""`pgeval demo` on the real collection it ships (Cranfield with all-MiniLM-L6-v2 embeddings,
package data): it loses relevant chunks in every category, writes the
sweep plot and the HTML report to --out, ends with a short advise (its report there too), and
leaves no target, schema, scratch copy or temporary file behind."""

from __future__ import annotations

import glob
import json
import re
import tempfile

import pytest

from evaluator.demo import cranfield


def test_packaged_collection_is_complete():
    corpus = cranfield.load()
    assert len(corpus.chunks) == 1400 and corpus.vectors.shape == (1400, 384)
    assert len(corpus.queries) == 225 and all(len(q["embedding"]) == 384 for q in corpus.queries)
    assert sum(len(q["relevant"]) for q in corpus.queries) == 1837
    assert sum(q.get("answerable", True) for q in corpus.queries) == 222


@pytest.mark.slow
def test_demo_on_cranfield(clean, pgeval, conn, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the demo's temp dir goes
    out_dir = tmp_path / "out"
    code, out, err = pgeval("demo", "--out", str(out_dir))
    assert code == 0, err  # (how long it takes is a benchmark's question, not this test's)
    for text in (
        "$ pgeval run pipeline",
        "hnsw.ef_search=10",
        "$ pgeval stage-report",
        "$ pgeval sweep",
        "$ pgeval report",
        "pgeval db stop",
        "pgeval target add kb",
    ):
        assert text in out, text
    assert len(re.findall(r"^\(\d+\.\d s\)$", out, re.M)) >= 8  # every step is timed
    assert "not statistically meaningful" not in out + err
    assert (out_dir / "report.html").stat().st_size > 10_000
    assert (out_dir / "sweep-hnsw.png").read_bytes()[:4] == b"\x89PNG"
    # the tour ends with a short advise: its recommendation, the DDL, its HTML report
    tail = out[out.index("$ pgeval advise") :]
    assert "--designs hnsw,ivfflat" in tail and "recommended: " in tail
    # the table's own HNSW index (m 16, ef_construction 64) reaches the target: kept, as no
    # design to build beats its p95 beyond the noise with a recall interval above the target
    # (issue 50: an IVFFlat within the noise, 3 % smaller, 0.952 ±0.011, replaced it)
    assert "keep chunks_hnsw" in tail and "CREATE INDEX CONCURRENTLY" not in tail, tail
    assert "measuring chunks_hnsw in place" in out + err and "ALTER DATABASE" in tail
    assert "Recommendation: " in (out_dir / "advise.html").read_text(encoding="utf-8")
    experiment = conn.execute(
        "SELECT name FROM pgeval.experiment WHERE name ~ '^demo-[0-9-]+$'"
    ).fetchone()[0]
    code, text, err = pgeval("stage-report", experiment, "--format", "json")
    assert code == 0, err
    report = json.loads(text)
    assert report["counts"]["valid"] == 222
    # the headroom is in the merge's ordering, not in fusion's loss (issue 48, item 2), and about
    # two thirds of every top 10 carries no judgement: said, and the figures called lower bounds
    assert report["advice"].startswith("Largest headroom: reorder at merge"), report["advice"]
    assert "judged@10 is 0.3" in err and "lower bounds" in err
    # the README's demo figures are this run's, within an HNSW build's noise (issue 40, item 3)
    from evaluator.demo import readme

    shown = readme.current((readme.ROOT / "README.md").read_text(encoding="utf-8"))
    assert not readme.drift(shown, readme.block(report, out)), (
        readme.drift(shown, readme.block(report, out)),
        "regenerate: python -m evaluator.demo.readme",
    )
    loss = {r["category"]: r["chunks"] for r in report["loss_attribution"]}
    assert all(loss.get(c, 0) > 0 for c in ("index", "reach", "fusion", "kept")), loss
    recall = {s["stage"]: s for s in report["stages"]}
    assert abs(recall["exact"]["metrics"]["recall@10"]["mean"] - 0.440) < 0.002, recall["exact"]
    assert abs(recall["bm25"]["metrics"]["recall@10"]["mean"] - 0.409) < 0.002, recall["bm25"]
    assert 0.445 < recall["merge"]["metrics"]["recall@10"]["mean"] < 0.465, recall["merge"]
    assert 0.94 < recall["hnsw"]["index_recall@10"]["mean"] < 0.99, recall["hnsw"]  # ef_search=10
    # no target left naming the dropped table, no schema, no temporary file
    assert conn.execute("SELECT count(*) FROM pgeval.target").fetchone()[0] == 0
    assert conn.execute("SELECT to_regnamespace('pgeval_demo')").fetchone()[0] is None
    assert not glob.glob(str(tmp_path / "pgeval-demo-*"))
    assert not conn.execute(
        "SELECT 1 FROM pg_namespace WHERE nspname LIKE 'pgeval\\_scratch\\_%'"
    ).fetchall()
    # the demo twice in a row gives the same recommendations (issue 50): the sweep's setting and
    # advise's choice (its own setting is found on the index this run builds again)
    code, again, err = pgeval("demo", "--out", str(tmp_path / "again"))
    assert code == 0, err
    first = re.findall(r"^recommended: (\S+)", out, re.M)
    assert first and re.findall(r"^recommended: (\S+)", again, re.M) == first
    assert "keep chunks_hnsw" in again[again.index("$ pgeval advise") :]
