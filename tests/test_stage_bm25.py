"""The keyword stage on the real server: pg_textsearch BM25 (index scan and the sequential-scan
trap), the full-text fallback, filters, duplicate rows, batch mode, Chinese with a pre-segmented
column, and the errors a user can make."""

from __future__ import annotations

import pytest
from helpers import make_testset
from helpers_stage import (
    ZH_TABLE,
    build_text_kb,
    close_ctx,
    prepare_and_run,
    stage_ctx,
    stored,
    text_target,
)

from evaluator.core.errors import InputError
from evaluator.providers.segmenters import bigrams, segment
from evaluator.stages.bm25 import Bm25Stage

QUERIES = {
    "q1": "what similarity laws must be obeyed when constructing aeroelastic models of heated "
    "high speed aircraft",
    "q2": "boundary layer transition at supersonic speeds",
    "q3": "heat transfer in laminar flow over a flat plate",
    "q4": "",  # no text: no result, no error
}


@pytest.fixture
def kb(clean, conn):
    docs = build_text_kb(conn)
    make_testset(conn, "kw", {q: {} for q in QUERIES}, texts=QUERIES)
    return docs


def run_stage(database, conn, *, target=None, name="bm25", **kw):
    ctx = stage_ctx(
        database,
        conn,
        testset="kw",
        experiment="kwx",
        stage="bm25",
        target=target or text_target(),
        **kw,
    )
    run_id = prepare_and_run(Bm25Stage(), ctx, f"kwx.{name}.{ctx.repetition}")
    params = conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (run_id,)).fetchone()[
        0
    ]
    return run_id, params, ctx.warnings


def direct_bm25(conn, text: str, k: int, where: str = "") -> list[tuple[str, float]]:
    """The same ranking straight from pg_textsearch (index scan forced), best score per chunk."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        rows = conn.execute(
            f"SELECT doc_id, min(s) FROM (SELECT doc_id, body <@> to_bm25query(%s, 'bm_docs_bm25') "
            f"AS s FROM bm_docs {where} ORDER BY 2 LIMIT %s) x WHERE s < 0 GROUP BY doc_id "
            "ORDER BY 2, 1",
            (text, k),
        ).fetchall()
    return [(d, -s) for d, s in rows]


def test_pg_textsearch_ranks_like_the_index(database, conn, kb):
    run_id, params, warnings = run_stage(database, conn)
    assert params["method"] == "pg_textsearch" and params["index"] == "bm_docs_bm25"
    assert params["score"] == "similarity" and params["kind"] == "bm25"
    got = stored(conn, run_id)
    assert "q4" not in got and any("no text" in w for w in warnings)
    for qid in ("q1", "q2", "q3"):
        want = direct_bm25(conn, QUERIES[qid], 10)
        assert [c for c, _ in got[qid]] == [c for c, _ in want]
        assert [s for _, s in got[qid]] == pytest.approx([s for _, s in want], rel=1e-5)
        scores = [s for _, s in got[qid]]
        assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    rows = conn.execute(
        "SELECT min(rows_returned), max(rows_returned) FROM pgeval.query_timing "
        "WHERE run_id = %s AND query_id <> 'q4'",
        (run_id,),
    ).fetchone()
    assert rows[0] > 0 and rows[1] <= 10


def test_sequential_scan_zero_scores_are_dropped(database, conn, kb):
    """A sequential scan scores every row; the non-matching ones (score 0) must not be stored."""
    nonsense = {"q9": "zyxwvut qqqqq", "q8": "supersonic zyxwvut"}
    conn.execute("DELETE FROM pgeval.query WHERE query_id IN ('q1', 'q2', 'q3', 'q4')")
    for i, (qid, text) in enumerate(nonsense.items()):
        conn.execute(
            "INSERT INTO pgeval.query (testset_id, query_id, position, query_text) "
            "SELECT testset_id, %s, %s, %s FROM pgeval.testset WHERE name = 'kw'",
            (qid, 10 + i, text),
        )
    run_id, params, _ = run_stage(
        database, conn, depth=5000, settings={"enable_indexscan": "off", "enable_bitmapscan": "off"}
    )
    assert params["scan"] == "sequential scan"
    got = stored(conn, run_id)
    assert "q9" not in got  # nothing matches: nothing stored
    n_match = conn.execute(
        "SELECT count(*) FROM bm_docs WHERE body <@> to_bm25query('supersonic', 'bm_docs_bm25') < 0"
    ).fetchone()[0]
    assert (
        0 < len(got["q8"]) == n_match < conn.execute("SELECT count(*) FROM bm_docs").fetchone()[0]
    )
    assert all(s > 0 for _, s in got["q8"])


def test_fulltext_fallback_without_a_bm25_index(database, conn, kb):
    run_id, params, warnings = run_stage(
        database, conn, options={"column": "note", "config": "english"}
    )
    assert params["method"] == "fts" and "not BM25" in params["note"]
    assert any("full-text search" in w for w in warnings)
    got = stored(conn, run_id)
    # every result matches at least one lexeme of the query, ranked by ts_rank_cd descending
    for qid in ("q2", "q3"):
        want = conn.execute(
            "SELECT doc_id, ts_rank_cd(to_tsvector('english', note), q)::float8 FROM bm_docs, "
            "(SELECT replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery AS q) x "
            "WHERE to_tsvector('english', note) @@ q ORDER BY 2 DESC, 1 LIMIT 10",
            (QUERIES[qid],),
        ).fetchall()
        assert got[qid] == [(d, pytest.approx(s)) for d, s in want]


def test_filters_and_duplicate_rows(database, conn, kb):
    target = text_target(filters={"lang": "en"})
    run_id, _, _ = run_stage(database, conn, target=target)
    fr = {r[0] for r in conn.execute("SELECT doc_id FROM bm_docs WHERE lang = 'fr'")}
    got = stored(conn, run_id)
    assert not any(c in fr for rows in got.values() for c, _ in rows)
    assert [c for c, _ in got["q2"]] == [
        c for c, _ in direct_bm25(conn, QUERIES["q2"], 10, "WHERE lang = 'en'")
    ]
    # two rows of one chunk collapse to one entry (its best score)
    top = got["q3"][0][0]
    conn.execute(
        "INSERT INTO bm_docs SELECT doc_id, body || ' extra words', note, lang, emb "
        "FROM bm_docs WHERE doc_id = %s",
        (top,),
    )
    try:
        run_id, _, _ = run_stage(database, conn, name="bm25dup")
        ids = [c for c, _ in stored(conn, run_id)["q3"]]
        assert ids.count(top) == 1 and len(ids) == len(set(ids))
    finally:
        conn.execute("DELETE FROM bm_docs WHERE doc_id = %s AND body LIKE '%% extra words'", (top,))


def test_batch_mode_gives_the_same_lists(database, conn, kb):
    one, _, _ = run_stage(database, conn, name="each")
    many, params, _ = run_stage(database, conn, name="batch", batch=True)
    assert params["batch"] is True
    a, b = stored(conn, one), stored(conn, many)
    assert a.keys() == b.keys()
    for qid in a:
        assert [c for c, _ in a[qid]] == [c for c, _ in b[qid]]
    assert (
        conn.execute(
            "SELECT count(*) FROM pgeval.query_timing WHERE run_id = %s", (many,)
        ).fetchone()[0]
        == 0
    )


def test_chinese_with_a_pre_segmented_column(database, conn, kb):
    assert bigrams("北京大学 AI") == ["北京", "京大", "大学", "ai"]
    make_testset(conn, "zh", {"z": {}, "w": {}}, texts={"z": "北京的大学", "w": "语义检索"})
    ctx = stage_ctx(
        database,
        conn,
        testset="zh",
        experiment="zhx",
        stage="bm25",
        target=text_target("zh", ZH_TABLE, text_column="body_seg"),
        options={"segmenter": "bigram"},
    )
    try:
        run_id = Bm25Stage().run(ctx, "zhx.bm25.1")
    finally:
        close_ctx(ctx)
    got = stored(conn, run_id)
    assert {c for c, _ in got["z"]} == {"z1", "z3"}  # 北京 and/or 大学
    assert got["w"][0][0] == "z5"  # 语义 + 检索 beat 检索 alone
    assert {c for c, _ in got["w"]} == {"z5", "z6"}


def test_jieba_segmenter(conn):
    pytest.importorskip("jieba")
    assert segment("我来到北京清华大学", "jieba").split() == ["我", "来到", "北京", "清华大学"]


def test_user_errors(database, conn, kb):
    with pytest.raises(InputError, match="needs a text column"):
        run_stage(database, conn, target=text_target(text_column=None))
    with pytest.raises(InputError, match="no bm25 index on bm_docs.note"):
        run_stage(database, conn, options={"column": "note", "method": "pg_textsearch"})
    with pytest.raises(InputError, match="unknown segmenter 'klingon'"):
        run_stage(database, conn, options={"segmenter": "klingon"})
    with pytest.raises(InputError, match="column 'nope' does not exist"):
        run_stage(database, conn, options={"column": "nope"})
    with pytest.raises(InputError, match="not a text search configuration"):
        run_stage(database, conn, options={"method": "fts", "config": "nope"})
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 0


def _nodes(node) -> list[dict]:
    return [node] + [n for child in node.get("Plans", []) for n in _nodes(child)]


def test_the_timed_statement_is_the_ids_in_index_order_without_the_score(database, conn, kb):
    """A projected score makes pg_textsearch run its standalone scorer once per returned row
    inside the timed statement; the application's statement selects the ids only (the index
    scan's own ORDER BY score is no projection). The scores are looked up apart."""
    ctx = stage_ctx(
        database, conn, testset="kw", experiment="kwt", stage="bm25", target=text_target()
    )
    try:
        stage = Bm25Stage()
        plan = stage.resolve(ctx)
        stmt, params = stage.statement(ctx, plan, False)
        text = stmt.as_string(ctx.kb)
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            cur = conn.execute(text, {**params, "q": QUERIES["q2"]})
            assert [d.name for d in cur.description] == ["chunk_id"]
            explained = conn.execute(
                "EXPLAIN (VERBOSE, FORMAT JSON) " + text, {**params, "q": QUERIES["q2"]}
            ).fetchone()[0][0]["Plan"]
        nodes = _nodes(explained)
        assert [n.get("Index Name") for n in nodes if n["Node Type"] == "Index Scan"] == [
            "bm_docs_bm25"
        ]
        outputs = [o for n in nodes for o in n.get("Output", [])]
        assert not [o for o in outputs if "<@>" in o], outputs  # no scorer in any projection
    finally:
        close_ctx(ctx)
    run_id, params, _ = run_stage(database, conn, name="timed")
    assert params["timed_statement"] == text and "no score projected" in params["timed"]
    boundary = conn.execute(
        "SELECT timing_boundary FROM pgeval.run WHERE run_id = %s", (run_id,)
    ).fetchone()[0]
    assert "round trip" in boundary and "ids in index order" in boundary
    assert all(s > 0 for rows in stored(conn, run_id).values() for _, s in rows)
