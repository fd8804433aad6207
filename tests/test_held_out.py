"""Sampled rows measured held out (issue "What the application gets", item 8): after `sweep
--find` on --sample-queries through the table's own index, the sampled rows' bias is measured on
two copies, one with the sampled rows in the index and one without, and the range the
application's queries may read is printed beside the table's figure, on the real server.

- The copies: the graph copy holds every sampled row, the held-out copy none, and both the same
  other rows (the first by md5 of the chunk id).
- The check's figures are those of its two stored one-point sweeps, read from SQL; the estimate
  is the table's recall plus the difference; text and JSON say it.
- It is skipped where it does not apply (no sampled rows, --held-out-rows 0).
"""

from __future__ import annotations

import json

import clustered_kb
import numpy as np
import pytest

pytestmark = pytest.mark.slow

TABLE, DIM, N = "held_out_kb", 32, 3000


@pytest.fixture(scope="module")
def target(database):
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(20, DIM))
    docs = (centers[rng.integers(0, 20, N)] + 0.7 * rng.normal(size=(N, DIM))).astype(np.float32)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (id, e) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", clustered_kb.vtext(v)))
        c.execute("SET max_parallel_maintenance_workers = 0")
        c.execute(
            f"CREATE INDEX held_out_kb_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops) "
            "WITH (m = 4, ef_construction = 10)"
        )
        c.execute(f"ANALYZE {TABLE}")
    from evaluator.targets.add import add_target

    add_target(database, "heldout", table=TABLE, id_column="id", vector_column="e", replace=True)
    yield "heldout"
    clustered_kb.drop(database, TABLE)


def test_copies_hold_the_sampled_rows_in_one_and_out_of_the_other(database, target):
    from evaluator.tuning.sweep.held_out import copies

    ids = [f"c{i}" for i in range(1, 3001, 60)]  # 50 "sampled" rows
    with copies(database, target, ids, 1000) as made:
        with database.connect() as conn:
            from evaluator.targets import targets

            graph, held = targets.load(conn, made.graph), targets.load(conn, made.held)
        with database.connect(results=False) as kb:
            read = lambda t: {  # noqa: E731
                r[0] for r in kb.execute(f'SELECT id FROM "{t.schema}"."{t.table}"')
            }
            in_graph, held_out = read(graph), read(held)
    assert made.rows == len(in_graph) == 1000
    assert set(ids) <= in_graph and not set(ids) & held_out
    assert held_out == in_graph - set(ids)
    # the others are the first of the md5 order
    with database.connect(results=False) as kb:
        first = [
            r[0]
            for r in kb.execute(
                f"SELECT id FROM {TABLE} WHERE NOT id = ANY(%s) ORDER BY md5(id), id LIMIT 950",
                (ids,),
            )
        ]
    assert set(first) == held_out
    with database.connect(results=False) as kb:  # dropped on exit
        assert (
            kb.execute("SELECT to_regclass(%s)", (f'"{graph.schema}".graph',)).fetchone()[0] is None
        )


def test_find_on_sampled_rows_measures_their_bias_held_out(pgeval, conn, target):
    code, out, err = pgeval(
        f"sweep --sample-queries 60 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1 --held-out-rows 1500 --format json"
    )
    assert code == 0, err
    d = json.loads(out)
    held = d["held_out"]
    assert held["rows"] == 1500 and held["queries"] == 60
    assert held["index"] == "held_out_kb_hnsw"
    assert held["value"] == d["finds"][0]["value"] and held["setting"] == "hnsw.ef_search"
    # the figures are the stored one-point sweeps', computed by SQL
    for kind, key in (("graph", "in_graph"), ("held", "held_out")):
        sid = conn.execute(
            "SELECT sweep_id FROM pgeval.sweep WHERE name = %s", (f"{d['sweep']}~{kind}1500",)
        ).fetchone()[0]
        recall = conn.execute(
            "SELECT index_recall FROM pgeval.sweep_summary(%s)", (sid,)
        ).fetchone()[0]
        assert recall == pytest.approx(held[key], abs=1e-12)
    assert held["bias"] == pytest.approx(held["held_out"] - held["in_graph"], abs=1e-12)
    assert held["estimate"] == pytest.approx(
        min(1.0, max(0.0, held["table"] + held["bias"])), abs=1e-12
    )
    assert held["range"] == sorted([held["table"], held["estimate"]])
    assert any(n.startswith("sampled rows measured held out") for n in d["notes"])
    # a rerun finds both copies' sweeps stored: the same figures
    code, out, err = pgeval(
        f"sweep --sample-queries 60 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1 --held-out-rows 1500"
    )
    assert code == 0, err
    assert f"at ef_search={held['value']} they read recall@10 {held['in_graph']:.4f}" in out
    assert "the application's queries may read" in out


def test_skipped_where_it_does_not_apply(pgeval, target):
    code, out, err = pgeval(
        f"sweep --sample-queries 30 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.9 --repeat 1 --held-out-rows 0 --format json"
    )
    assert code == 0, err
    assert json.loads(out)["held_out"] is None


def test_at_the_tables_size_by_default(pgeval, conn, target):
    """Without --held-out-rows the bias is measured at the table's size (issue 47: it grows with
    the rows): the held-out copy holds every row but the sampled ones, and the sampled rows in
    the graph are the table's own figure."""
    code, out, err = pgeval(
        f"sweep --sample-queries 60 --target {target} --stage hnsw --find hnsw.ef_search "
        "--target-recall 0.95 --repeat 1 --format json"
    )
    assert code == 0, err
    d = json.loads(out)
    held = d["held_out"]
    assert held["every_row"] is True and held["rows"] == N
    assert held["in_graph"] == pytest.approx(held["table"], abs=1e-12)
    sid = conn.execute(
        "SELECT sweep_id FROM pgeval.sweep WHERE name = %s", (f"{d['sweep']}~held{N}",)
    ).fetchone()[0]
    recall = conn.execute("SELECT index_recall FROM pgeval.sweep_summary(%s)", (sid,)).fetchone()[0]
    assert recall == pytest.approx(held["held_out"], abs=1e-12)
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.sweep WHERE name = %s", (f"{d['sweep']}~graph{N}",)
        ).fetchone()[0]
        == 0
    )  # (no copy of the graph: the table is it)
    assert any(n.startswith(f"sampled rows measured held out: at the table's size ({N:,} rows)")
               for n in d["notes"])  # fmt: skip
