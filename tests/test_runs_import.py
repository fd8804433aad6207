"""`pgeval run import/export/list`: TREC and JSONL run files against the real server."""

import io
import json

import pytest
from helpers import make_testset

from evaluator.core.errors import Conflict, InputError
from evaluator.measure import metrics
from evaluator.run.runs import export_run, import_run


@pytest.fixture
def ts(clean, conn):
    make_testset(conn, "runs-ts", {"q1": {"a": 1, "b": 2}, "q2": {"x": 3}, "q3": {"y": 1}})
    return "runs-ts"


def _results(conn, name, columns="query_id, rank, chunk_id"):
    """``columns`` (fixed by the tests) of run ``name``'s results, by query then rank."""
    return conn.execute(
        f"SELECT {columns} FROM pgeval.result JOIN pgeval.run USING (run_id) "
        "WHERE name = %s ORDER BY query_id, rank",
        (name,),
    ).fetchall()


def test_trec_orders_by_score_then_chunk_id_descending(conn, ts, tmp_file):
    f = tmp_file(
        "r.trec",
        "q1 Q0 a 1 1.0 t\nq1 Q0 c 2 3.0 t\nq1 Q0 b 3 3.0 t\nq2 Q0 x 1 0.5 t\nzz Q0 x 1 9 t\n",
    )
    rep = import_run(conn, f, ts, "r-trec", "trec")
    assert (rep.rows, rep.queries, rep.unknown_queries) == (4, 2, 1)
    assert rep.unknown_query_ids == ["zz"]
    assert rep.valid_without_result == 1  # q3
    assert _results(conn, "r-trec") == [
        ("q1", 1, "c"),
        ("q1", 2, "b"),
        ("q1", 3, "a"),
        ("q2", 1, "x"),
    ]
    run = metrics.resolve_run(conn, "r-trec")
    assert "trec_eval" in run.order_rule and run.status == "complete"


def test_jsonl_keeps_given_order(conn, ts, tmp_file):
    f = tmp_file(
        "r.jsonl",
        json.dumps(
            {
                "query_id": "q1",
                "ranked": [{"chunk_id": "a", "score": 0.1}, {"chunk_id": "z", "score": 0.9}, "b"],
            }
        )
        + "\n",
    )
    import_run(conn, f, ts, "r-jsonl")
    assert _results(conn, "r-jsonl") == [("q1", 1, "a"), ("q1", 2, "z"), ("q1", 3, "b")]


@pytest.mark.parametrize(
    "name,content,message",
    [
        (
            "dup.trec",
            "q1 Q0 a 1 1 t\nq1 Q0 b 2 0.5 t\nq1 Q0 a 3 0.2 t\n",
            "dup.trec:3: query 'q1' lists chunk 'a' twice (lines 1 and 3)",
        ),
        ("short.trec", "q1 Q0 a 1 1\n", "short.trec:1: expected 6 fields"),
        (
            "score.trec",
            "q1 Q0 a 1 high t\n",
            "score.trec:1, field 'score': score 'high' is not a number",
        ),
        ("empty.trec", "", "empty.trec: empty file"),
        ("latin1.trec", b"q1 Q0 \xe9 1 1 t\n", "latin1.trec:1: not valid UTF-8"),
        ("bad.jsonl", '{"query_id": "q1", "ranked": [}\n', "bad.jsonl:1: malformed JSON"),
        ("noid.jsonl", '{"ranked": ["a"]}\n', "noid.jsonl:1, field 'query_id'"),
        (
            "dup.jsonl",
            '{"query_id": "q1", "ranked": ["a", "a"]}\n',
            "query 'q1' lists chunk 'a' twice",
        ),
    ],
)
def test_bad_run_files_are_rejected_and_nothing_written(conn, ts, tmp_file, name, content, message):
    f = tmp_file(name, content)
    with pytest.raises(InputError) as err:
        import_run(conn, f, ts, "bad-run")
    assert message in str(err.value)
    assert conn.execute("SELECT count(*) FROM pgeval.run WHERE name = 'bad-run'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pgeval.result").fetchone()[0] == 0


def test_name_taken_is_refused_unless_replace(conn, ts, tmp_file):
    f = tmp_file("r.trec", "q1 Q0 a 1 1 t\n")
    import_run(conn, f, ts, "again")
    with pytest.raises(Conflict):
        import_run(conn, f, ts, "again")
    import_run(conn, f, ts, "again", replace=True)
    assert len(_results(conn, "again")) == 1


def test_export_round_trips(conn, ts, tmp_file):
    f = tmp_file("r.trec", "q1 Q0 a 1 1.5 t\nq1 Q0 b 2 2.5 t\nq2 Q0 x 1 0.5 t\n")
    import_run(conn, f, ts, "rt")
    out = io.StringIO()
    export_run(conn, "rt", "trec", out)
    back = tmp_file("back.trec", out.getvalue())
    import_run(conn, back, ts, "rt2")
    assert _results(conn, "rt") == _results(conn, "rt2")
    out = io.StringIO()
    export_run(conn, "rt", "jsonl", out)
    first = json.loads(out.getvalue().splitlines()[0])
    assert first == {
        "query_id": "q1",
        "score": "similarity",  # a TREC file's scores: higher is better (trec_eval's rule)
        "ranked": [{"chunk_id": "b", "score": 2.5}, {"chunk_id": "a", "score": 1.5}],
    }


def test_cli_import_metrics_export(pgeval, ts, tmp_file):
    f = tmp_file("r.trec", "q1 Q0 a 1 1 t\nq2 Q0 y 1 1 t\nq3 Q0 y 1 1 t\n")
    code, out, err = pgeval("run", "import", str(f), "--testset", ts, "--name", "cli-run")
    assert code == 0, err
    assert "imported run 'cli-run': 3 results for 3 queries" in out
    code, out, err = pgeval("metrics", "cli-run", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["recall@3"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert data["counts"]["valid"] == 3
    code, out, err = pgeval("run", "export", "cli-run", "--format", "trec")
    assert code == 0 and out.splitlines()[0].startswith("q1 Q0 a 1 ")
    code, out, err = pgeval(
        "run", "import", str(tmp_file("e.trec", "")), "--testset", ts, "--name", "x"
    )
    assert code == 1 and err.startswith("pgeval: error: ") and "empty file" in err
    assert "Traceback" not in err


def test_imported_rows_carry_their_judged_grades(conn, ts, tmp_file):
    """run import joins the judgements itself (the trigger stands aside for that statement);
    rows written any other way still get their grades from the trigger."""
    f = tmp_file("g.trec", "q1 Q0 a 1 3 t\nq1 Q0 zz 2 2 t\nq1 Q0 b 3 1 t\nq2 Q0 x 1 1 t\n")
    import_run(conn, f, ts, "graded")
    assert conn.execute(
        "SELECT query_id, chunk_id, grade FROM pgeval.result JOIN pgeval.run "
        "USING (run_id) WHERE name = 'graded' ORDER BY 1, rank"
    ).fetchall() == [("q1", "a", 1), ("q1", "zz", None), ("q1", "b", 2), ("q2", "x", 3)]
    rid = conn.execute("SELECT run_id FROM pgeval.run WHERE name = 'graded'").fetchone()[0]
    conn.execute(
        "INSERT INTO pgeval.result (run_id, query_id, rank, chunk_id) VALUES (%s, 'q3', 1, 'y')",
        (rid,),
    )
    assert (
        conn.execute(
            "SELECT grade FROM pgeval.result WHERE run_id = %s AND query_id = 'q3'", (rid,)
        ).fetchone()[0]
        == 1
    )
    assert conn.execute("SELECT current_setting('pgeval.result_grades', true)").fetchone()[0] in (
        None,
        "",
    )


def test_export_to_a_missing_folder_is_one_line_and_writes_nothing(pgeval, ts, tmp_file, tmp_path):
    f = tmp_file("r.trec", "q1 Q0 a 1 1 t\n")
    assert pgeval("run", "import", str(f), "--testset", ts, "--name", "ex")[0] == 0
    code, out, err = pgeval("run", "export", "ex", "--out", str(tmp_path / "no" / "x.trec"))
    assert code == 1 and "Traceback" not in err
    assert err.strip() == (
        f"pgeval: error: {tmp_path / 'no' / 'x.trec'}: cannot write there: "
        "No such file or directory"
    )
    code, out, err = pgeval("run", "export", "nosuch", "--out", str(tmp_path / "y.trec"))
    assert code == 1 and not list(tmp_path.glob("y.trec*"))


def test_trec_text_after_the_sixth_field_is_ignored_as_trec_eval_does(conn, ts, tmp_file, pgeval):
    """trec_eval ignores what follows the run tag (its regression file results.trunc has such
    lines): the run is the one without the text, and the import summary says so once."""
    plain = "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 3.0 t\nq2 Q0 x 1 0.5 t\n"
    noisy = (
        "q1 Q0 a 1 1.0 t  trailing words here\nq1 Q0 b 2 3.0 t\n"
        "q2 Q0 x 1 0.5 t\t9 Q0 y 7 not-a-score \\ extra\n"
    )
    rep = import_run(conn, tmp_file("noisy.trec", noisy), ts, "noisy", "trec")
    import_run(conn, tmp_file("plain.trec", plain), ts, "plain", "trec")
    assert rep.lines_with_extra_text == 2 and rep.rows == 3
    assert (
        _results(conn, "noisy")
        == _results(conn, "plain")
        == [("q1", 1, "b"), ("q1", 2, "a"), ("q2", 1, "x")]
    )
    scores = conn.execute(
        "SELECT array_agg(score ORDER BY query_id, rank) FROM pgeval.result "
        "JOIN pgeval.run USING (run_id) WHERE name = 'noisy'"
    ).fetchone()[0]
    assert scores == [3.0, 1.0, 0.5]
    code, out, err = pgeval(
        "run", "import", str(tmp_file("noisy2.trec", noisy)), "--testset", ts, "--name", "noisy-cli"
    )
    assert code == 0, err
    said = [line for line in (out + err).splitlines() if "sixth field" in line]
    assert len(said) == 1 and said[0].count("2 lines") == 1 and "ignored" in said[0]
    # fewer than six fields is still refused, with file and line
    with pytest.raises(InputError, match=r"short2.trec:2: expected 6 fields"):
        import_run(conn, tmp_file("short2.trec", "q1 Q0 a 1 1 t x\nq1 Q0 b 2\n"), ts, "short2")


def test_trec_extra_text_counted_once_when_queries_are_interleaved(conn, ts, tmp_file):
    """A file whose queries are interleaved is read twice (streamed, then grouped in memory):
    the lines with text after the sixth field are counted once, on the read that is stored."""
    text = "q1 Q0 a 1 2.0 t  extra words\nq2 Q0 x 1 0.5 t\nq1 Q0 b 2 1.0 t more\n"
    rep = import_run(conn, tmp_file("interleaved-extra.trec", text), ts, "interleaved-extra")
    assert rep.lines_with_extra_text == 2 and rep.rows == 3 and rep.queries == 2
    assert _results(conn, "interleaved-extra") == [("q1", 1, "a"), ("q1", 2, "b"), ("q2", 1, "x")]


@pytest.mark.parametrize("fmt", ["trec", "jsonl"])
def test_import_reports_bytes_read_once_a_batch(conn, ts, tmp_file, monkeypatch, fmt):
    from evaluator.run import runs

    monkeypatch.setattr(runs, "_BATCH", 2)  # a report every 2 COPY lines
    if fmt == "trec":
        text = "".join(f"q{i % 3 + 1} Q0 c{i} {i} {1 / (i + 1)} t\n" for i in range(9))
    else:
        text = "".join(
            json.dumps({"query_id": f"q{i}", "ranked": [f"c{j}" for j in range(3)]}) + "\n"
            for i in (1, 2, 3)
        )
    f = tmp_file(f"p.{fmt}", text)
    calls = []
    rep = import_run(conn, f, ts, f"p-{fmt}", fmt, on_progress=lambda *a: calls.append(a))
    assert rep.rows == 9
    size = len(text.encode())
    reading = [c for c in calls if c[2] == "reading"]
    assert len(reading) == 4 and all(0 < d <= size and t == size for d, t, _ in reading)
    assert [done for done, _, _ in reading] == sorted(done for done, _, _ in reading)
    assert calls[-1] == (size, size, "ranking") and len(calls) == 5


def _graded(conn, name):
    """(query, chunk, grade) of run ``name``'s results, in rank order."""
    return _results(conn, name, "query_id, chunk_id, grade")


def test_judgements_read_on_the_importing_connection_while_parsing(conn, ts, tmp_file, monkeypatch):
    """The judgements are read on the importing connection, in pipeline mode while the first
    batches are parsed (no second session is opened), and before the COPY: the right grades,
    unknown queries and counts, including in a file of more batches than are held before the
    judgements are read."""
    import psycopg

    from evaluator.run import ranked_lists

    opened = []
    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: opened.append(a))
    monkeypatch.setattr(ranked_lists, "BATCH_ROWS", 2)  # a batch every query or so
    monkeypatch.setattr(ranked_lists, "_HELD_BATCHES", 1)
    f = tmp_file(
        "j.trec",
        "q1 Q0 b 1 3 t\nq1 Q0 zz 2 2 t\nq1 Q0 a 3 1 t\nq9 Q0 a 1 1 t\nq2 Q0 x 1 1 t\n",
    )
    report = import_run(conn, f, ts, "judged")
    conn.commit()
    assert opened == []
    assert (report.queries, report.rows, report.unknown_query_ids) == (2, 4, ["q9"])
    assert _graded(conn, "judged") == [
        ("q1", "b", 2),
        ("q1", "zz", None),
        ("q1", "a", 1),
        ("q2", "x", 3),
    ]


def test_judgements_read_again_after_an_interleaved_file(conn, ts, tmp_file):
    """A file whose queries are interleaved is found so while the judgements are being read
    (pipeline mode), and read again grouped in memory: the grades are joined all the same."""
    f = tmp_file("i.trec", "q1 Q0 b 1 3 t\nq2 Q0 x 1 1 t\nq1 Q0 a 2 1 t\n")
    report = import_run(conn, f, ts, "judged-interleaved")
    conn.commit()
    assert (report.queries, report.rows) == (2, 3)
    assert _graded(conn, "judged-interleaved") == [("q1", "b", 2), ("q1", "a", 1), ("q2", "x", 3)]


def test_judgements_read_in_line_where_libpq_has_no_pipeline_mode(conn, ts, tmp_file, monkeypatch):
    """With a libpq older than 14 (no pipeline mode), the judgements are read on the importing
    connection before the COPY: the same grades."""
    import psycopg

    monkeypatch.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda cls: False))
    monkeypatch.setattr(psycopg.Connection, "pipeline", None)  # never entered
    f = tmp_file("l.trec", "q1 Q0 b 1 3 t\nq1 Q0 a 2 1 t\nq2 Q0 x 1 1 t\n")
    report = import_run(conn, f, ts, "judged-in-line")
    conn.commit()
    assert (report.queries, report.rows) == (2, 3)
    assert _graded(conn, "judged-in-line") == [("q1", "b", 2), ("q1", "a", 1), ("q2", "x", 3)]


def test_judgements_written_in_the_importing_transaction_are_joined(conn, clean, tmp_file):
    """A test set loaded in the transaction that imports the run (not committed: another
    session cannot see it) gives the lists their grades: they are read in that transaction."""
    f = tmp_file("u.trec", "q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\n")
    with conn.transaction():
        make_testset(conn, "uncommitted", {"q1": {"a": 2}})
        report = import_run(conn, f, "uncommitted", "in-transaction")
        assert (report.queries, report.rows) == (1, 2)
        assert conn.execute(
            "SELECT chunk_id, grade FROM pgeval.result JOIN pgeval.run USING (run_id) "
            "WHERE name = 'in-transaction' ORDER BY rank"
        ).fetchall() == [("a", 2), ("b", None)]
