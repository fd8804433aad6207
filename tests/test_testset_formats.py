"""Each format loads into pgeval.query / pgeval.qrel as written, and pgeval.run_counts sees the
valid / excluded / unanswerable split the loader promises."""

from __future__ import annotations

import gzip
import json

import pytest
from helpers import make_run

from evaluator.core.errors import InputError, NotFound
from evaluator.testset import guess_format, load, resolve_testset

JSONL = (
    "\n".join(
        json.dumps(r, ensure_ascii=False)
        for r in [
            {
                "id": "q1",
                "query": "退款多久到账？",
                "relevant": {"c12": 3, "c40": 1},
                "type": ["fuzzy", "multi_answer"],
                "answerable": True,
                "expected_facts": ["7 天", "原路退回"],
            },
            {
                "id": "q2",
                "query": "how do I reset my password 🔑",
                "relevant": ["c7", "文档-3"],
                "embedding": [0.5, -1, 2.25],
            },
            {
                "id": 3,
                "query": "CEO 的鞋码",
                "answerable": False,
                "relevant": {"c1": 0},
                "type": "long_tail",
            },
        ]
    )
    + "\n"
)

CSV_JSON_CELLS = (
    "id,query,relevant,type,answerable,expected_facts,embedding,notes\n"
    'q1,退款多久到账？,"{""c12"": 3, ""c40"": 1}","[""fuzzy"", ""multi_answer""]",true,'
    '"[""7 天"", ""原路退回""]",,ignored\n'
    'q2,how do I reset my password 🔑,"[""c7"", ""文档-3""]",,,,"[0.5, -1, 2.25]",\n'
    '3,CEO 的鞋码,"{""c1"": 0}",long_tail,false,,,\n'
)

CSV_COMPACT = (
    "\ufeffID,Query,Relevant,Type,Answerable,Expected_Facts,Embedding\r\n"
    "q1,退款多久到账？,c12:3;c40:1,fuzzy;multi_answer,yes,7 天;原路退回,\r\n"
    "q2,how do I reset my password 🔑,c7;文档-3,,,,0.5;-1;2.25\r\n"
    "\r\n"
    "3,CEO 的鞋码,c1:0,long_tail,no,,\r\n"
)


def _queries(conn, name):
    return conn.execute(
        "SELECT q.query_id, q.position, q.query_text, q.types, q.answerable, q.expected_facts, "
        "q.embedding::text FROM pgeval.query q JOIN pgeval.testset USING (testset_id) "
        "WHERE name = %s ORDER BY position",
        (name,),
    ).fetchall()


def _qrels(conn, name):
    return conn.execute(
        "SELECT j.query_id, j.chunk_id, j.grade, j.source_grade FROM pgeval.qrel j "
        "JOIN pgeval.testset USING (testset_id) WHERE name = %s ORDER BY 1, 2",
        (name,),
    ).fetchall()


def _run_counts(conn, name, ranked):
    rid = make_run(conn, f"{name}-run", name, ranked)
    row = conn.execute(
        "SELECT queries, valid, excluded, unanswerable, no_result FROM pgeval.run_counts(%s)",
        (rid,),
    ).fetchone()
    return dict(
        zip(("queries", "valid", "excluded", "unanswerable", "no_result"), row, strict=True)
    )


EXPECTED_QUERIES = [
    ("q1", 1, "退款多久到账？", ["fuzzy", "multi_answer"], True, ["7 天", "原路退回"], None),
    ("q2", 2, "how do I reset my password 🔑", [], True, [], "[0.5,-1,2.25]"),
    ("3", 3, "CEO 的鞋码", ["long_tail"], False, [], None),
]


def test_jsonl_loads_every_field_and_chinese_round_trips(clean, conn, tmp_file):
    report = load(conn, tmp_file("cases.jsonl", JSONL), "kb")
    assert (
        report.n_queries,
        report.n_judgements,
        report.n_valid,
        report.n_no_relevant,
        report.n_unanswerable,
        report.unchanged,
    ) == (3, 5, 2, 0, 1, False)
    assert len(report.content_hash) == 64
    assert _queries(conn, "kb") == EXPECTED_QUERIES
    assert _qrels(conn, "kb") == [
        ("3", "c1", 0, "0"),
        ("q1", "c12", 3, "3"),
        ("q1", "c40", 1, "1"),
        ("q2", "c7", 1, None),
        ("q2", "文档-3", 1, None),
    ]
    tid, digest = resolve_testset(conn, "kb")
    assert (tid, digest) == (report.testset_id, report.content_hash)
    assert conn.execute(
        "SELECT n_queries, n_judgements, source_format, grade_map FROM "
        "pgeval.testset WHERE testset_id = %s",
        (tid,),
    ).fetchone() == (3, 5, "jsonl", None)
    # the ideal DCG is a property of the test set, filled by refresh_ideal
    assert conn.execute(
        "SELECT grades_desc FROM pgeval.query WHERE testset_id = %s AND query_id = 'q1'", (tid,)
    ).fetchone()[0] == [3, 1]
    counts = _run_counts(conn, "kb", {"q1": ["c40", "c12"], "3": ["c9"]})
    assert counts == {"queries": 3, "valid": 2, "excluded": 0, "unanswerable": 1, "no_result": 1}


@pytest.mark.parametrize("content", [CSV_JSON_CELLS, CSV_COMPACT], ids=["json-cells", "compact"])
def test_csv_matches_jsonl_content_and_hash(content, clean, conn, tmp_file):
    ref = load(conn, tmp_file("cases.jsonl", JSONL), "ref")
    report = load(conn, tmp_file("cases.csv", content), "kb-csv")
    assert _queries(conn, "kb-csv") == EXPECTED_QUERIES
    assert [r[:3] for r in _qrels(conn, "kb-csv")] == [r[:3] for r in _qrels(conn, "ref")]
    # the hash is over normalised content: the same test set in another format hashes the same
    assert report.content_hash == ref.content_hash


def test_csv_line_numbers_count_multiline_cells(clean, conn, tmp_file):
    path = tmp_file("m.csv", 'id,query,relevant\nq1,"two\nlines",c1\nq2,x,c2:9\n')
    with pytest.raises(InputError) as info:
        load(conn, path, "m")
    assert (info.value.line, info.value.field) == (4, "relevant")
    assert "grade 9 is outside 0-3" in str(info.value)


def test_trec_without_queries_derives_queries_and_counts_all_zero_as_excluded(
    clean, conn, tmp_file
):
    path = tmp_file("run.qrels", "q2 0 d1 2\nq1 0 d2 1\n\nq2 0 d3 0\nq3 0 d4 0\nq3 0 d5 0\n")
    report = load(conn, path, "trec")
    assert (
        report.n_queries,
        report.n_judgements,
        report.n_valid,
        report.n_no_relevant,
        report.n_unanswerable,
    ) == (3, 5, 2, 1, 0)
    assert [(q[0], q[1], q[2], q[4]) for q in _queries(conn, "trec")] == [
        ("q2", 1, None, True),
        ("q1", 2, None, True),
        ("q3", 3, None, True),
    ]
    assert _qrels(conn, "trec")[:2] == [("q1", "d2", 1, "1"), ("q2", "d1", 2, "2")]
    counts = _run_counts(conn, "trec", {"q2": ["d1"], "q3": ["d4"]})
    assert counts == {"queries": 3, "valid": 2, "excluded": 1, "unanswerable": 0, "no_result": 1}


def test_trec_with_queries_and_grade_map(clean, conn, tmp_file):
    qrels = tmp_file("t.qrels", "1 0 184 2\n1 0 29 -1\n2 0 12 4\n2 0 13 4\n3 0 5 1\n")
    queries = tmp_file(
        "t.tsv", "1\twhat similarity laws\n2\tboundary\tlayer\n3\t湍流\n4\tno judgement names me\n"
    )
    report = load(conn, qrels, "gm", queries=queries, grade_map="1=3,2=2,3=1,4=0,-1=0")
    assert (
        report.n_queries,
        report.n_judgements,
        report.n_valid,
        report.n_no_relevant,
        report.n_skipped,
    ) == (3, 5, 2, 1, 1)
    assert report.grade_map == {"-1": 0, "1": 3, "2": 2, "3": 1, "4": 0}
    assert [(q[0], q[1], q[2]) for q in _queries(conn, "gm")] == [
        ("1", 1, "what similarity laws"),
        ("2", 2, "boundary\tlayer"),
        ("3", 3, "湍流"),
    ]
    assert _qrels(conn, "gm") == [
        ("1", "184", 2, "2"),
        ("1", "29", 0, "-1"),
        ("2", "12", 0, "4"),
        ("2", "13", 0, "4"),
        ("3", "5", 3, "1"),
    ]
    stored = conn.execute("SELECT grade_map FROM pgeval.testset WHERE name = 'gm'").fetchone()[0]
    assert stored == {"-1": 0, "1": 3, "2": 2, "3": 1, "4": 0}
    # the same file with another grade map is other content
    other = load(conn, qrels, "gm2", queries=queries, grade_map="1=3,2=1,3=1,4=0,-1=0")
    assert other.content_hash != report.content_hash


def test_beir_folder(clean, conn, tmp_path):
    folder = tmp_path / "scifact"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text(
        '{"_id": "1", "text": "0-dimensional biomaterials", "metadata": {}}\n'
        '{"_id": "2", "text": "train-only query"}\n'
        '{"_id": "3", "text": "氨基酸"}\n'
        '{"_id": "5", "text": "all zero"}\n',
        encoding="utf-8",
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\t31715818\t1\n3\t14717500\t2\n3\tdoc 2\t1\n5\t9\t0\n",
        encoding="utf-8",
    )
    assert guess_format(folder) == "beir"
    report = load(conn, folder, "beir")
    assert (
        report.n_queries,
        report.n_judgements,
        report.n_valid,
        report.n_no_relevant,
        report.n_skipped,
        report.source_format,
    ) == (3, 4, 2, 1, 1, "beir")
    assert [(q[0], q[1], q[2]) for q in _queries(conn, "beir")] == [
        ("1", 1, "0-dimensional biomaterials"),
        ("3", 2, "氨基酸"),
        ("5", 3, "all zero"),
    ]
    assert ("3", "doc 2", 1, "1") in _qrels(conn, "beir")
    counts = _run_counts(conn, "beir", {"1": ["31715818"], "3": ["doc 2"], "5": ["9"]})
    assert counts == {"queries": 3, "valid": 2, "excluded": 1, "unanswerable": 0, "no_result": 0}


def test_gzip_and_ndjson_are_read(clean, conn, tmp_path):
    path = tmp_path / "cases.ndjson.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(JSONL)
    assert guess_format(path) == "jsonl"
    report = load(conn, path, "gz")
    assert (report.n_queries, report.n_judgements) == (3, 5)
    assert _queries(conn, "gz") == EXPECTED_QUERIES


def test_guess_format():
    from pathlib import Path

    assert [
        guess_format(Path(p))
        for p in ("a.jsonl", "a.CSV", "cran.qrels", "x.trec", "qrels.test.txt")
    ] == ["jsonl", "csv", "trec", "trec", "trec"]


def test_resolve_unknown_testset(clean, conn):
    with pytest.raises(NotFound, match="no test set named 'nope'"):
        resolve_testset(conn, "nope")


def test_progress_bar_on_a_terminal_only(clean, conn, tmp_file, monkeypatch, capsys):
    from evaluator.testset import progress

    monkeypatch.setattr(progress, "BIG", 0)
    path = tmp_file("cases.jsonl", JSONL)
    assert load(conn, path, "piped", progress=True).n_queries == 3
    assert capsys.readouterr() == ("", "")  # not a terminal: no bar, no stray newline
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stderr as a terminal
    assert load(conn, path, "tty", progress=True).n_queries == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert "reading" in err or "ideal DCG" in err  # the bar goes to stderr, and only there


def test_progress_lines_when_piped(clean, conn, tmp_file, monkeypatch, capsys):
    """Not a terminal: one-line progress messages (here at every update), the file's bytes as
    the total; the default interval (10 s) keeps a fast load silent (test above)."""
    import re

    from rich.filesize import decimal

    from evaluator.testset import progress

    monkeypatch.setattr(progress, "BIG", 0)
    monkeypatch.setenv("PGEVAL_PROGRESS_INTERVAL", "0")
    path = tmp_file("cases.jsonl", JSONL)
    assert load(conn, path, "piped-lines", progress=True).n_queries == 3
    out, err = capsys.readouterr()
    total = re.escape(decimal(path.stat().st_size))
    assert out == "" and re.search(rf"^progress: ideal DCG {total}/{total} \(100%\)", err, re.M)


def test_qrels_groups_and_duplicates_across_groups(clean, conn, tmp_file, monkeypatch):
    from evaluator.testset.formats import trec

    monkeypatch.setattr(trec, "GROUP", 2)  # consecutive lines of a query, at most 2 a row
    path = tmp_file("g.qrels", "q1 0 c1 1\nq1 0 c2 2\nq1 0 c3 3\nq2 0 c1 0\nq1 0 c4 1\n")
    report = load(conn, path, "groups")
    assert (report.n_queries, report.n_judgements, report.n_valid, report.n_no_relevant) == (
        2,
        5,
        1,
        1,
    )
    assert [r[1:3] for r in _qrels(conn, "groups")] == [
        ("c1", 1),
        ("c2", 2),
        ("c3", 3),
        ("c4", 1),
        ("c1", 0),
    ]
    bad = tmp_file("d.qrels", "q1 0 c1 1\nq1 0 c2 2\nq1 0 c3 3\nq2 0 c1 0\nq1 0 c2 1\n")
    with pytest.raises(InputError) as info:
        load(conn, bad, "dup")
    assert str(info.value) == (
        f"{bad}:5, field 'chunk-id': query 'q1' judges chunk 'c2' twice (also on line 2)"
    )
    assert conn.execute("SELECT count(*) FROM pgeval.testset WHERE name = 'dup'").fetchone()[0] == 0
