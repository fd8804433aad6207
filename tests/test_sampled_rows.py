"""Sampled rows are labelled, and measured where they can be (issue 47, item 3), on the real
server, a clustered table of 20,000 x 32-dim rows with an HNSW index in place.

- A sampled row is a node of the index it searches: through the index in place its recall is an
  upper bound for the application's queries. sweep and advise print it as such (text and JSON,
  ``"queries": "sampled rows"``) and never as "meets".
- advise builds the same index definition on a held-out copy of every row (the sampled rows left
  out) when the build fits --max-confirm-s, and recommends that copy's setting: checked
  independently, with held-out query vectors of the same distribution (not rows of the table)
  sent through the application's statement at the recommended setting, against numpy's exact
  search.
"""

from __future__ import annotations

import html
import json

import clustered_kb
import numpy as np
import pytest

pytestmark = pytest.mark.slow

TABLE, TARGET, INDEX = "sampled_kb", "sampled", "sampled_kb_hnsw"
DIM, N, NQ = 32, 20_000, 300
# a sparse graph (m 8, ef_construction 32): the target needs a real ef_search, the bias shows
BUILD = "--build hnsw:m=8 --build hnsw:ef_construction=32"


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    docs, queries, _ = clustered_kb.build(
        database,
        tmp_path_factory.mktemp("sampled"),
        TABLE,
        dim=DIM,
        n=N,
        nq=NQ,
        seed=47,
        spread=1.2,
        indexes=[
            f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 8, ef_construction = 32)"
        ],
    )
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield docs, queries
    clustered_kb.drop(database, TABLE)


def test_sweep_on_sampled_rows_prints_an_upper_bound(pgeval, kb):
    cmd = (
        f"sweep --sample-queries 100 --target {TARGET} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1 --held-out-rows 0"
    )
    code, out, err = pgeval(cmd + " --format json")
    assert code == 0, err
    d = json.loads(out)
    assert d["queries_label"] == "sampled rows"
    assert d["recommendation"]["queries"] == "sampled rows"
    assert {p["queries"] for p in d["points"]} == {"sampled rows"}
    assert d["find"]["queries"] == "sampled rows"
    assert "upper bound" in d["recommendation_line"]
    code, out, err = pgeval(cmd)
    assert code == 0, err
    rec = d["recommendation"]
    assert (
        f"≤ {rec['index_recall']:.4f} for the application's queries (sampled rows: an upper bound)"
        in out
    )
    assert "is the smallest value reaching" not in out  # the find says what read it
    assert "pgeval queries capture --how" in out


def test_advise_where_no_held_out_build_fits_never_says_meets(pgeval, kb, tmp_path):
    # screened on 5,000 rows: the index in place's build on every row is estimated above 0 s
    page = tmp_path / "advise.html"
    code, out, err = pgeval(
        f"advise --sample-queries 100 --target {TARGET} --designs hnsw {BUILD} "
        "--target-recall 0.95 --repeat 1 --final-rounds 1 --sample-rows 5000 "
        f"--max-confirm-s 0 --format json --report {page}"
    )
    assert code == 0, err
    d = json.loads(out)
    row = next(r for r in d["designs"] if r.get("in_place"))
    assert row["queries"] == "sampled rows" and row["held_out_build"]["built"] is False
    rec = d["recommendation"]
    assert rec is not None and rec["queries"] == "sampled rows" and rec["keep"] == INDEX
    assert "upper bound" in rec["why"] and "meet" not in rec["why"]
    assert "reaches recall" not in rec["why"]
    assert "pgeval queries capture --how" in rec["why"]
    assert any("--max-confirm-s" in n and "upper bound" in n for n in d["notes"])
    from evaluator.tuning.advise.report import rows

    verdicts = {r["verdict"] for r in rows(d, short=True) if r.get("in_place")}
    assert verdicts == {"upper bound (sampled rows)"}
    body = html.unescape(page.read_text(encoding="utf-8"))  # the report says it too
    assert "(sampled rows: an upper bound)" in body and "pgeval queries capture --how" in body


def _recall_of_the_application(database, docs, queries, ef: int) -> float:
    """Mean recall@10 of ``queries`` (not rows of the table) sent through the application's
    statement at ``hnsw.ef_search = ef``, against numpy's exact cosine search."""
    from evaluator.core.vector_literal import vector_literal

    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    got = []
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"SET hnsw.ef_search = {int(ef)}")
        for q in queries:
            ids = [
                r[0]
                for r in c.execute(
                    f"SELECT id FROM {TABLE} ORDER BY e <=> %s::vector LIMIT 10",
                    (vector_literal(q),),
                )
            ]
            exact = np.argsort(-(unit @ (q / np.linalg.norm(q))), kind="stable")[:10]
            truth = {f"c{i + 1}" for i in exact}
            got.append(len(truth & set(ids)) / 10)
    return float(np.mean(got))


def test_advise_recommends_the_held_out_copys_setting(pgeval, database, kb):
    docs, queries = kb
    code, out, err = pgeval(
        f"advise --sample-queries 200 --target {TARGET} --designs hnsw {BUILD} "
        "--target-recall 0.95 --repeat 1 --final-rounds 1 --format json"
    )
    assert code == 0, err
    d = json.loads(out)
    rec = d["recommendation"]
    assert rec is not None and rec["keep"] == INDEX  # the index in place: nothing to build
    assert rec["queries"] == "held-out rows"
    upper = rec["upper_bound"]
    assert upper["setting"] and upper["recall"] is not None
    ef = int(rec["setting"]["hnsw.ef_search"])
    assert f"measured on a held-out copy of all {N - 200:,} rows" in rec["why"]
    assert f"ef_search {ef} reaches 0.95 there" in rec["why"]
    assert "upper bound" in rec["why"]  # the in-place figure, said as what it is
    # the application's queries at the recommended setting reach the target within the interval
    real = _recall_of_the_application(database, docs, queries, ef)
    assert real >= 0.95 - rec["recall_margin"], (real, rec["recall"], rec["recall_margin"])
    # the text says it too
    code, out, err = pgeval(
        f"advise --sample-queries 200 --target {TARGET} --designs hnsw {BUILD} "
        "--target-recall 0.95 --repeat 1 --final-rounds 1"
    )
    assert code == 0, err
    assert f"keep {INDEX}" in out and "held-out copy of all" in out


def test_watch_on_sampled_rows_prints_an_upper_bound(pgeval, kb):
    probe = f"watch --target {TARGET} --stage hnsw --sample-queries 50 --set hnsw.ef_search=20"
    code, out, err = pgeval(probe + " --format json")
    assert code == 0, err
    d = json.loads(out)
    assert d["queries_label"] == "sampled rows"
    code, out, err = pgeval(probe)
    assert code == 0, err
    assert (
        f"recall@10 ≤ {d['recall']:.4f} for the application's queries (sampled rows: an upper bound)"
        in out
    )
