"""The Cranfield judgements (../shared/data/cranfield) load as TREC qrels with the Cleverdon grade
map and the query texts: 225 queries, 1837 judgements. Skipped where ../shared is absent."""

from __future__ import annotations

from collections import Counter

from helpers import make_run

from evaluator.testset import load, show_testset
from evaluator.testset.datasets import cranfield


def write_trec_files(folder, out_dir):
    """cranqrel as TREC qrels (``qid 0 doc code``) and the queries as TSV; their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    qrel_path, query_path = out_dir / "cranfield.qrels", out_dir / "cranfield.queries.tsv"
    qrels = cranfield.qrels(folder)
    qrel_path.write_text("".join(f"{q} 0 {d} {c}\n" for q, d, c in qrels), encoding="utf-8")
    queries = cranfield.queries(folder)
    query_path.write_text("".join(f"{q}\t{t}\n" for q, t in queries), encoding="utf-8")
    return qrel_path, query_path


def _expected(folder):
    judged = cranfield.qrels(folder)
    grades = Counter(cranfield.GRADE_MAP[code] for _, _, code in judged)
    valid = {q for q, _, code in judged if cranfield.GRADE_MAP[code] > 0}
    return judged, grades, valid


def test_cranfield_loads_with_grade_map(shared_dir, clean, conn, tmp_path, pgeval):
    folder = shared_dir / "data" / "cranfield"
    qrels, queries = write_trec_files(folder, tmp_path)
    judged, grades, valid = _expected(folder)
    code, out, err = pgeval(
        "testset",
        "load",
        str(qrels),
        "--queries",
        str(queries),
        "--grade-map",
        cranfield.GRADE_MAP_SPEC,
        "--name",
        "cranfield",
    )
    assert code == 0, err
    assert "queries 225: valid" in out and "judgements 1837" in out
    info = show_testset(conn, "cranfield")
    assert (info["queries"], info["judgements"], info["without_text"]) == (225, 1837, 0)
    assert info["grades"] == {str(g): n for g, n in sorted(grades.items())}
    assert info["grade_map"] == {"-1": 0, "1": 3, "2": 2, "3": 1, "4": 0}
    assert info["valid"] == len(valid)
    assert info["excluded"] == 225 - len(valid)
    texts = dict(cranfield.queries(folder))
    stored = dict(
        conn.execute(
            "SELECT query_id, query_text FROM pgeval.query q JOIN "
            "pgeval.testset USING (testset_id) WHERE name = 'cranfield'"
        )
    )
    assert stored == texts
    rid = make_run(conn, "cran-run", "cranfield", {"1": ["184", "29"]})
    counts = conn.execute(
        "SELECT queries, valid, excluded, no_result FROM pgeval.run_counts(%s)", (rid,)
    ).fetchone()
    assert counts == (225, len(valid), 225 - len(valid), len(valid) - 1)
    # loading again is a no-op
    again = load(conn, qrels, "cranfield", queries=queries, grade_map=cranfield.GRADE_MAP_SPEC)
    assert again.unchanged


def test_cranfield_without_grade_map_names_the_first_bad_code(
    shared_dir, clean, conn, tmp_path, pgeval
):
    qrels, queries = write_trec_files(shared_dir / "data" / "cranfield", tmp_path)
    lines = qrels.read_text(encoding="utf-8").splitlines()
    n, code = next(
        (i, line.split()[3])
        for i, line in enumerate(lines, 1)
        if line.split()[3] not in ("0", "1", "2", "3")
    )
    rc, _, err = pgeval("testset", "load", str(qrels), "--queries", str(queries), "--name", "c")
    assert rc == 1
    assert err.startswith(f"pgeval: error: {qrels}:{n}, field 'grade': grade {code} is outside 0-3")
    assert conn.execute("SELECT count(*) FROM pgeval.testset").fetchone()[0] == 0
