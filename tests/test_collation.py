"""Ids are compared, sorted and tie-broken in byte order (trec_eval's strcmp) whatever the
database's collation: the same tie-heavy run scores the same in the session's C database and in an
en_US.UTF-8 database, and equals pytrec_eval (trec_eval) on both; exported ties read back to the
same ranking; pipeline stages break ties by chunk id in byte order, for text ids in a language
collation and for integer ids alike."""

from __future__ import annotations

import io
import random

import pytest
from helpers import make_testset

from evaluator.measure import metrics
from evaluator.run.pipeline import PipelineConfig, run_pipeline
from evaluator.run.runs import export_run, import_run

pytrec_eval = pytest.importorskip("pytrec_eval")

# ids whose byte order differs from en_US.UTF-8 order (case, punctuation, accents, digits)
CHUNKS = ["a1", "B1", "b1", "_x", "Z", "A1", "a_2", "b-1", "\u00c4", "\u00e9", "10", "9", "a", "A"]
PREFIXES = ["q", "Q", "_q", "q-"]
MEASURES = ["recall@3", "ndcg@3", "mrr@20", "rprec"]


def tie_heavy(n_queries: int = 60, seed: int = 7):
    """qrels {qid: {chunk: grade}} and a run {qid: {chunk: score}} with two score values only."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for i in range(n_queries):
        qid = f"{PREFIXES[i % len(PREFIXES)]}{i}"
        judged = rng.sample(CHUNKS, 5)
        qrels[qid] = {c: rng.choice((0, 1, 2, 3)) for c in judged}
        qrels[qid][judged[0]] = 2  # every query valid
        run[qid] = {c: rng.choice((1.0, 0.5)) for c in CHUNKS}
    return qrels, run


def trec_file(path, run) -> None:
    rng = random.Random(3)
    lines = [f"{q} Q0 {c} 0 {s!r} t\n" for q, d in run.items() for c, s in d.items()]
    rng.shuffle(lines)  # the file's order means nothing to trec_eval
    path.write_text("".join(lines), encoding="utf-8")


def trec_eval(qrels, run):
    """{qid: {measure: value}} from pytrec_eval, named as pgeval names them."""
    rec = pytrec_eval.RelevanceEvaluator(qrels, {"recall_3", "recip_rank", "Rprec"}).evaluate(run)
    gains = {q: {c: 2**g - 1 for c, g in d.items()} for q, d in qrels.items()}
    nd = pytrec_eval.RelevanceEvaluator(gains, {"ndcg_cut_3"}).evaluate(run)
    return {
        q: {
            "recall@3": rec[q]["recall_3"],
            "mrr@20": rec[q]["recip_rank"],
            "ndcg@3": nd[q]["ndcg_cut_3"],
            "rprec": rec[q]["Rprec"],
        }
        for q in rec
    }


def byte_order_ranking(scores: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by docno descending in strcmp (byte) order."""
    by_id = sorted(scores, key=lambda c: c.encode("utf-8"), reverse=True)
    return sorted(by_id, key=lambda c: -scores[c])


def stored(conn, run_name):
    out: dict[str, list] = {}
    for qid, chunk in conn.execute(
        "SELECT x.query_id, x.chunk_id FROM pgeval.result x JOIN pgeval.run r USING (run_id) "
        "WHERE r.name = %s ORDER BY x.query_id, x.rank",
        (run_name,),
    ):
        out.setdefault(qid, []).append(chunk)
    return out


def disagreements(conn, run_name, expected) -> list:
    rid = metrics.resolve_run(conn, run_name).run_id
    ours = {r["query_id"]: r for r in metrics.per_query(conn, rid, MEASURES)}
    assert set(ours) == set(expected)
    return [
        (q, m, ours[q][m], expected[q][m])
        for q in expected
        for m in MEASURES
        if abs(ours[q][m] - expected[q][m]) > 1e-9
    ]


@pytest.fixture
def tied(tmp_path):
    qrels, run = tie_heavy()
    path = tmp_path / "ties.trec"
    trec_file(path, run)
    return qrels, run, path


@pytest.mark.parametrize("which", ["C", "en_US"])
def test_tie_heavy_run_matches_trec_eval_on_any_collation(request, tied, which):
    conn = request.getfixturevalue("conn" if which == "C" else "en_us_conn")
    if which == "C":
        request.getfixturevalue("clean")
    qrels, run, path = tied
    make_testset(conn, "ties", qrels)
    import_run(conn, path, "ties", "ties-run", "trec")
    assert disagreements(conn, "ties-run", trec_eval(qrels, run)) == []
    assert stored(conn, "ties-run") == {q: byte_order_ranking(d) for q, d in run.items()}
    # listings of query ids are in byte order too (function results carry no column collation)
    rid = metrics.resolve_run(conn, "ties-run").run_id
    listed = list(dict.fromkeys(r["query_id"] for r in metrics.per_query(conn, rid, MEASURES)))
    assert listed == sorted(run)


def test_export_of_ties_reads_back_to_the_same_ranking(en_us_conn, tied):
    conn = en_us_conn
    qrels, _, path = tied
    make_testset(conn, "ties", qrels)
    import_run(conn, path, "ties", "ties-run", "trec")
    out = io.StringIO()
    export_run(conn, "ties-run", "trec", out)
    exported: dict[str, dict[str, float]] = {}
    for line in out.getvalue().splitlines():
        q, _, c, _, s, _ = line.split()
        exported.setdefault(q, {})[c] = float(s)
    # what trec_eval reads from the export is the stored ranking, and scores the same
    assert {q: byte_order_ranking(d) for q, d in exported.items()} == stored(conn, "ties-run")
    assert disagreements(conn, "ties-run", trec_eval(qrels, exported)) == []
    back = path.with_name("back.trec")
    back.write_text(out.getvalue(), encoding="utf-8")
    import_run(conn, back, "ties", "ties-back", "trec")
    assert stored(conn, "ties-back") == stored(conn, "ties-run")


def test_jsonl_order_exported_as_trec_keeps_the_ranking(en_us_conn, tmp_path):
    conn = en_us_conn
    make_testset(conn, "ties", {"q1": {"a1": 1, "B1": 2}})
    order = ["Z", "a1", "_x", "B1", "b1"]
    src = tmp_path / "r.jsonl"
    src.write_text('{"query_id": "q1", "ranked": ["' + '", "'.join(order) + '"]}\n')
    import_run(conn, src, "ties", "as-given", "jsonl")
    out = io.StringIO()
    export_run(conn, "as-given", "trec", out)
    back = tmp_path / "back.trec"
    back.write_text(out.getvalue(), encoding="utf-8")
    import_run(conn, back, "ties", "as-given-back", "trec")
    assert stored(conn, "as-given-back") == {"q1": order}


KB_IDS = ["a1", "B1", "b1", "_x", "Z", "A1", "a_2", "b-1", "\u00c4", "\u00e9"]


TABLES = ("kb_ties_text", "kb_ties_dup", "kb_ties_int")


@pytest.fixture
def tie_kb(en_us_conn):
    """Tables in the en_US database where every row has the same vector and the same text (every
    distance and keyword score ties): text ids (unique; each twice), and integer ids."""
    conn = en_us_conn
    conn.execute("DROP TABLE IF EXISTS " + ", ".join(TABLES))
    conn.execute("CREATE TABLE kb_ties_text (doc_id text PRIMARY KEY, emb vector(3), body text)")
    conn.execute("CREATE TABLE kb_ties_dup (doc_id text, emb vector(3), body text)")
    conn.execute("CREATE TABLE kb_ties_int (doc_id integer PRIMARY KEY, emb vector(3), body text)")
    for i, c in enumerate(KB_IDS):
        for table, value in (
            ("kb_ties_text", c),
            ("kb_ties_dup", c),
            ("kb_ties_dup", c),
            ("kb_ties_int", i * 7 + 1),
        ):
            conn.execute(f"INSERT INTO {table} VALUES (%s, '[1,2,3]', 'alpha beta')", (value,))
    for table in TABLES:
        conn.execute(f"CREATE INDEX ON {table} USING hnsw (emb vector_cosine_ops)")
    make_testset(
        conn,
        "kbt",
        {"q1": {"a1": 1, "B1": 1, "8": 1, "15": 1}},
        texts={"q1": "alpha"},
        embeddings={"q1": [1.0, 2.0, 3.0]},
    )
    from evaluator.targets.catalog import validate
    from evaluator.targets.targets import Target, save

    for table in TABLES:
        t = Target(
            name=table,
            table=table,
            schema="public",
            id_column="doc_id",
            vector_column="emb",
            text_column="body",
        )
        validate(conn, t)
        save(conn, t, replace=True)
    yield conn
    conn.execute("DROP TABLE IF EXISTS " + ", ".join(TABLES))


@pytest.mark.parametrize(
    "target,ids",
    [
        ("kb_ties_text", KB_IDS),
        ("kb_ties_dup", KB_IDS),
        ("kb_ties_int", [str(i * 7 + 1) for i in range(len(KB_IDS))]),
    ],
)
@pytest.mark.parametrize("batch", [False, True])
def test_pipeline_ties_break_by_chunk_id_in_byte_order(en_us_database, tie_kb, target, ids, batch):
    conn = tie_kb
    res = run_pipeline(
        en_us_database,
        PipelineConfig(
            testset="kbt",
            stages="exact,hnsw,bm25,merge",
            target=target,
            repeat=1,
            depth=20,
            name=f"ties-{target}-{int(batch)}",
            batch=batch,
        ),
    )
    expected = sorted(ids)  # Python's str order is code point = byte order
    if target != "kb_ties_int":  # the case a language collation gets wrong
        assert expected != sorted(ids, key=str.lower)
    for stage in ("exact", "hnsw", "bm25", "merge"):
        assert stored(conn, f"{res.experiment}.{stage}.1") == {"q1": expected}, stage
