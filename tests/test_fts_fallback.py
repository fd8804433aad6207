"""The keyword stage's full-text fallback (ts_rank_cd, not BM25) on the embedded server, forced with
``--opt bm25:method=fts`` (the server has pg_textsearch):

- it is named ``bm25 (ts_rank_cd fallback)`` wherever its figures appear: the pipeline's summary,
  stage-report (table, JSON, chain), metrics (header, JSON), report (JSON, Markdown, HTML); real
  BM25 (pg_textsearch) keeps the plain name;
- without a GIN index on its expression the stage prints the exact CREATE INDEX (and health a
  hint); with the index the plan uses it and the ranked lists do not change; a GIN index's
  configuration is used when none is given.
"""

from __future__ import annotations

import json

import pg_real
import pytest

TABLE = "fts_kb"
LABEL = "bm25 (ts_rank_cd fallback)"


@pytest.fixture
def kb(clean, conn, pgeval, tmp_path):
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0]:
        pg_real.build_kb(conn, TABLE)
    for name in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname LIKE 'fts_kb_t_%%'",
        (TABLE,),
    ).fetchall():
        conn.execute(f"DROP INDEX {name[0]}")
    cases = pg_real.write_cases(tmp_path / "cases.jsonl")
    for args in (
        ["testset", "load", str(cases), "--name", "fts"],
        [
            "target",
            "add",
            "fts",
            "--table",
            TABLE,
            "--id-column",
            "doc_id",
            "--vector-column",
            "emb",
            "--text-column",
            "body",
        ],
    ):
        code, _, err = pgeval(*args)
        assert code == 0, err
    yield conn
    for name in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname LIKE 'fts_kb_t_%%'",
        (TABLE,),
    ).fetchall():
        conn.execute(f"DROP INDEX {name[0]}")


def _pipeline(pgeval, name: str, *opts: str):
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "fts",
        "--target",
        "fts",
        "--stages",
        "exact,bm25",
        "--depth",
        "20",
        "--repeat",
        "1",
        "--name",
        name,
        *opts,
    )
    assert code == 0, err
    return out, err


def test_fallback_is_named_wherever_its_figures_appear(kb, pgeval, tmp_path):
    out, err = _pipeline(pgeval, "fb", "--opt", "bm25:method=fts", "--opt", "bm25:config=english")
    assert LABEL in out  # the pipeline's summary table

    code, out, err = pgeval("stage-report", "fb", "--worst", "0")
    assert code == 0, err
    assert (
        out.count(LABEL) >= 2
    )  # quality table and chain (at 80 columns the cost table may cut it)
    assert "stage bm25: PostgreSQL full-text search (ts_rank_cd" in err
    code, out, err = pgeval("stage-report", "fb", "--format", "json")
    doc = json.loads(out)
    stages = {s["stage"]: s for s in doc["stages"]}
    assert stages["bm25"]["label"] == LABEL and stages["bm25"]["method"] == "fts"
    assert stages["exact"]["label"] == "exact"
    assert any(w.startswith("stage bm25: PostgreSQL full-text search") for w in doc["warnings"])

    code, out, err = pgeval("metrics", "fb.bm25.1")
    assert code == 0 and f"stage {LABEL} ·" in out.splitlines()[0]
    code, out, err = pgeval("metrics", "fb.bm25.1", "--format", "json")
    assert json.loads(out)["stage_label"] == LABEL

    code, out, err = pgeval("report", "fb", "--format", "json")
    rep = json.loads(out)
    assert rep["run"]["stage_label"] == LABEL
    assert any("ts_rank_cd" in w and "not BM25" in w for w in rep["warnings"])
    assert {s["stage"]: s["label"] for s in rep["stage_report"]["stages"]}["bm25"] == LABEL
    code, md, err = pgeval("report", "fb", "--format", "md")
    assert f"- **stage**: {LABEL}" in md and f"| {LABEL} | bm25 |" in md
    html = tmp_path / "fb.html"
    code, out, err = pgeval("report", "fb", "--format", "html", "--out", str(html))
    assert code == 0, err
    text = html.read_text(encoding="utf-8")
    assert text.count(LABEL) >= 2 and "not BM25" in text


def test_real_bm25_keeps_its_name(kb, pgeval):
    kb.execute(
        f"CREATE INDEX fts_kb_t_bm25 ON {TABLE} USING bm25 (body) WITH (text_config = 'english')"
    )
    _pipeline(pgeval, "real")
    code, out, err = pgeval("stage-report", "real", "--format", "json")
    assert code == 0, err
    bm25 = {s["stage"]: s for s in json.loads(out)["stages"]}["bm25"]
    assert bm25["method"] == "pg_textsearch" and bm25["label"] == "bm25"
    assert "fallback" not in out and "ts_rank_cd" not in err


def _params(conn, run: str) -> dict:
    return conn.execute("SELECT params FROM pgeval.run WHERE name = %s", (run,)).fetchone()[0]


def _lists(conn, run: str) -> dict:
    return dict(
        conn.execute(
            "SELECT query_id, array_agg(chunk_id ORDER BY rank) FROM pgeval.result r "
            "JOIN pgeval.run USING (run_id) WHERE name = %s GROUP BY 1",
            (run,),
        ).fetchall()
    )


def test_gin_index_hint_then_use(kb, pgeval):
    out, err = _pipeline(
        pgeval, "nogin", "--opt", "bm25:method=fts", "--opt", "bm25:config=english"
    )
    hint = f'CREATE INDEX ON "{TABLE}" USING gin (to_tsvector(\'english\'::regconfig, "body"));'
    assert (
        f"no GIN index on to_tsvector('english', body): every query scans the whole table; "
        f"create one: {hint}" in err
    )
    p = _params(kb, "nogin.bm25.1")
    assert p["scan"] == "sequential scan" and p["index_hint"] == hint and p["fts_index"] is None
    code, out, err = pgeval("health", "--target", "fts", "--format", "json")
    keyword = {f["check"]: f for f in json.loads(out)}["keyword_index"]
    assert keyword["status"] == "hint" and hint in keyword["detail"]

    kb.execute(hint.replace("CREATE INDEX ON", "CREATE INDEX fts_kb_t_gin ON"))
    kb.execute(f"ANALYZE {TABLE}")
    out, err = _pipeline(pgeval, "gin", "--opt", "bm25:method=fts", "--opt", "bm25:config=english")
    assert "no GIN index" not in err
    p = _params(kb, "gin.bm25.1")
    assert p["scan"] == "index fts_kb_t_gin" and p["fts_index"] == "fts_kb_t_gin"
    assert "index_hint" not in p
    assert _lists(kb, "gin.bm25.1") == _lists(kb, "nogin.bm25.1")  # same answers, faster
    code, out, err = pgeval("health", "--target", "fts", "--format", "json")
    assert code == 0, err
    keyword = {f["check"]: f for f in json.loads(out)}["keyword_index"]
    assert keyword["status"] == "ok" and "GIN index fts_kb_t_gin" in keyword["detail"]


def test_configuration_of_the_gin_index_is_used(kb, pgeval):
    """No config option: the stage ranks with the configuration a GIN index on the column has
    ('simple' here, not the server's default), so that the index serves it."""
    kb.execute(f"CREATE INDEX fts_kb_t_simple ON {TABLE} USING gin (to_tsvector('simple', body))")
    kb.execute(f"ANALYZE {TABLE}")
    _, err = _pipeline(pgeval, "simple", "--opt", "bm25:method=fts")
    p = _params(kb, "simple.bm25.1")
    assert p["text_config"] == "simple" and p["fts_index"] == "fts_kb_t_simple"
    assert p["scan"] == "index fts_kb_t_simple" and "no GIN index" not in err
    # another configuration asked for: that index cannot serve it, and the stage says so
    _, err = _pipeline(
        pgeval, "english", "--opt", "bm25:method=fts", "--opt", "bm25:config=english"
    )
    assert "no GIN index on to_tsvector('english', body)" in err
    assert _params(kb, "english.bm25.1")["scan"] == "sequential scan"
