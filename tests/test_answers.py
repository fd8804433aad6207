"""End-to-end answers: citation precision and answer accuracy exactly as METRICS.md defines them,
computed by sql/300_answers.sql on the real server; import validation; `pgeval answers`."""

import json

import pytest
from helpers import make_run, make_testset

from evaluator.core.errors import Conflict, InputError
from evaluator.measure import answers

FACTS = {"q1": ["7 days", "refund"], "q2": ["Berlin"], "q3": [["2 GB", "2GB"]], "q4": []}


def set_facts(conn, testset, facts):
    for qid, f in facts.items():
        conn.execute(
            "UPDATE pgeval.query SET expected_facts = %s WHERE query_id = %s AND "
            "testset_id = (SELECT testset_id FROM pgeval.testset WHERE name = %s)",
            (json.dumps(f), qid, testset),
        )


def jsonl(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.fixture
def e2e(clean, conn):
    conn.execute("DELETE FROM pgeval.refusal_phrase")
    make_testset(
        conn,
        "e2e",
        {
            "q1": {"c1": 2, "c2": 1},
            "q2": {"c3": 3},
            "q3": {"c4": 1},
            "q4": {"c5": 1},
            "u1": {},
            "u2": {},
            "u3": {},
        },
        unanswerable=("u1", "u2", "u3"),
    )
    set_facts(conn, "e2e", FACTS)
    make_run(conn, "e2e-run", "e2e", {"q1": ["c1", "c2"], "q2": ["c3"]})
    yield conn
    conn.execute("DELETE FROM pgeval.refusal_phrase")


ANSWERS = [
    # answerable: cites two, one supported -> 0.5; contains both facts (case-insensitively) -> 1
    {
        "query_id": "q1",
        "answer": "A REFUND arrives within 7  days.",
        "cited": ["c1", "c9"],
        "supported": ["c1"],
        "latency_ms": 100,
    },
    # answerable, cites nothing -> citation precision 0; fact missing -> 0
    {
        "query_id": "q2",
        "answer": "It is in Munich.",
        "cited": [],
        "supported": [],
        "latency_ms": 300,
    },
    # answerable, alternative facts: "2GB" matches; all cited supported -> 1
    {
        "query_id": "q3",
        "answer": "The limit is 2GB.",
        "cited": ["c4"],
        "supported": ["c4"],
        "latency_ms": 200,
    },
    # answerable without expected facts: unjudged (NULL), left out of accuracy
    {"query_id": "q4", "answer": "Something.", "cited": ["c5"], "supported": ["c5"]},
    # unanswerable, cites nothing -> 1; Chinese refusal -> correct
    {"query_id": "u1", "answer": "抱歉，知识库中没有相关内容。", "cited": []},
    # unanswerable, curly apostrophe refusal -> correct; cites one unsupported -> 0
    {"query_id": "u2", "answer": "I don\u2019t know.", "cited": ["c1"], "supported": []},
    # u3 has no answer at all: 0 on both, counted as no answer
]


def test_per_query_values_follow_metrics_md(e2e, tmp_file):
    report = answers.import_answers(e2e, tmp_file("a.jsonl", jsonl(ANSWERS)), "e2e-run")
    assert report.imported == 6
    assert any("1 queries" in w and "no answer" in w for w in report.warnings)
    assert any("no expected facts" in w for w in report.warnings)
    rid = answers.resolve_run(e2e, "e2e-run").run_id
    rows = {r["query_id"]: r for r in answers.per_query(e2e, rid)}
    cp = {q: r["citation_precision"] for q, r in rows.items()}
    ok = {q: r["answer_correct"] for q, r in rows.items()}
    assert cp == {"q1": 0.5, "q2": 0.0, "q3": 1.0, "q4": 1.0, "u1": 1.0, "u2": 0.0, "u3": 0.0}
    assert ok == {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": None, "u1": 1.0, "u2": 1.0, "u3": 0.0}
    assert rows["u1"]["refused"] and rows["u2"]["refused"] and not rows["q1"]["refused"]
    s = answers.summary(e2e, rid)
    assert s["citation_precision"] == pytest.approx((0.5 + 0 + 1 + 1 + 1 + 0 + 0) / 7)
    assert s["answer_accuracy"] == pytest.approx(4 / 6)  # q4 unjudged
    assert s["answerable_accuracy"] == pytest.approx(2 / 3)
    assert s["unanswerable_accuracy"] == pytest.approx(2 / 3)
    assert (s["queries"], s["answered"], s["no_answer"], s["unjudged"]) == (7, 6, 1, 1)


def test_no_answers_means_no_metric(e2e):
    rid = answers.resolve_run(e2e, "e2e-run").run_id
    s = answers.summary(e2e, rid)
    assert s["citation_precision"] is None and s["answer_accuracy"] is None


def test_refusal_phrases_are_configurable(e2e, tmp_file):
    answers.import_answers(e2e, tmp_file("a.jsonl", jsonl(ANSWERS)), "e2e-run")
    rid = answers.resolve_run(e2e, "e2e-run").run_id
    phrases, default = answers.refusal_phrases(e2e)
    assert default and "知识库中没有" in phrases and "i don't know" in phrases
    answers.set_refusal_phrases(e2e, remove=["知识库中没有", "无相关内容"])
    assert {r["query_id"]: r["answer_correct"] for r in answers.per_query(e2e, rid)}["u1"] == 0.0
    answers.set_refusal_phrases(e2e, add=["抱歉"])
    assert {r["query_id"]: r["answer_correct"] for r in answers.per_query(e2e, rid)}["u1"] == 1.0
    phrases, default = answers.refusal_phrases(e2e)
    assert not default and "抱歉" in phrases and "知识库中没有" not in phrases
    with pytest.raises(InputError, match="not a refusal phrase"):
        answers.set_refusal_phrases(e2e, remove=["never there"])
    answers.set_refusal_phrases(e2e, reset=True)
    assert answers.refusal_phrases(e2e)[1]


def test_nearest_rank_percentiles(conn, e2e):
    def nr(values, p):
        return conn.execute("SELECT pgeval.nearest_rank(%s::float8[], %s)", (values, p)).fetchone()[
            0
        ]

    hundred = list(range(100, 0, -1))  # unsorted on purpose
    assert nr(hundred, 0.07) == 7  # ceil(0.07 * 100) = 7 exactly, not 8
    assert nr(hundred, 0.95) == 95
    assert nr(list(range(1, 21)), 0.95) == 19
    assert nr([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert nr([5.0], 0.99) == 5.0
    assert nr([], 0.95) is None
    with pytest.raises(Exception, match="percentile must be in"):
        nr([1.0], 0)


def test_latency_percentiles_of_answers_and_retrieval(e2e, tmp_file):
    from evaluator.measure import latency

    make_run(e2e, "timed", "e2e", {"q1": ["c1"], "q2": ["c3"]}, latency_ms={"q1": 10.0, "q2": 30.0})
    answers.import_answers(e2e, tmp_file("a.jsonl", jsonl(ANSWERS)), "timed")
    rid = answers.resolve_run(e2e, "timed").run_id
    assert latency.percentiles(e2e, rid) == {"n": 2, "p50_ms": 10.0, "p95_ms": 30.0, "p99_ms": 30.0}
    ans = latency.percentiles(e2e, rid, "answer")
    assert ans == {"n": 3, "p50_ms": 200.0, "p95_ms": 300.0, "p99_ms": 300.0}
    assert latency.summary_keys("answer", ans)["answer_latency_p95_ms"] == 300.0
    assert latency.summary_keys("retrieval", {"n": 0, "p95_ms": None}) == {}


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"query_id": "q1", "answer": "x", "cited": ["c1"], "supported": ["c2"]}',
            "a.jsonl:2, field 'supported': query 'q1': chunk 'c2' is supported but not cited",
        ),
        (
            '{"query_id": "q1", "answer": "x", "cited": ["c1", "c1"]}',
            "a.jsonl:2, field 'cited': query 'q1': chunk 'c1' is listed twice",
        ),
        (
            '{"query_id": "nope", "answer": "x"}',
            "a.jsonl:2, field 'query_id': query 'nope' is not in",
        ),
        ('{"query_id": "q1", "answer": 3}', "a.jsonl:2, field 'answer'"),
        ('{"query_id": "q1", "answer": "x", "latency_ms": -1}', "a.jsonl:2, field 'latency_ms'"),
        ('{"query_id": "q1", "answer": "x"', "a.jsonl:2: not valid JSON"),
        (
            '{"query_id": "q2", "answer": "again"}',
            "a.jsonl:2, field 'query_id': query 'q2' already answered on line 1",
        ),
    ],
)
def test_bad_lines_are_named_and_nothing_is_written(e2e, tmp_file, line, message):
    path = tmp_file("a.jsonl", '{"query_id": "q2", "answer": "ok"}\n' + line + "\n")
    with pytest.raises(InputError) as info:
        answers.import_answers(e2e, path, "e2e-run")
    assert message in str(info.value)
    assert e2e.execute("SELECT count(*) FROM pgeval.answer").fetchone()[0] == 0


def test_existing_answers_need_replace(e2e, tmp_file):
    path = tmp_file("a.jsonl", jsonl(ANSWERS))
    answers.import_answers(e2e, path, "e2e-run")
    with pytest.raises(Conflict, match="already has 6 answers"):
        answers.import_answers(e2e, tmp_file("b.jsonl", jsonl(ANSWERS[:2])), "e2e-run")
    assert e2e.execute("SELECT count(*) FROM pgeval.answer").fetchone()[0] == 6
    rep = answers.import_answers(
        e2e, tmp_file("b.jsonl", jsonl(ANSWERS[:2])), "e2e-run", replace=True
    )
    assert rep.replaced == 6
    assert e2e.execute("SELECT count(*) FROM pgeval.answer").fetchone()[0] == 2


def test_answers_commands(pgeval, e2e, tmp_file):
    path = tmp_file("a.jsonl", jsonl(ANSWERS))
    code, out, err = pgeval("answers", "import", str(path), "--run", "e2e-run")
    assert code == 0, err
    assert "imported 6 answers" in err and "citation precision 0.5000" in out
    code, out, err = pgeval("answers", "import", str(path), "--run", "e2e-run")
    assert code == 1 and err.startswith("pgeval: error: run 'e2e-run' already has 6 answers")
    code, out, err = pgeval("answers", "import", str(path), "--run", "missing-run")
    assert code == 1 and "no run named 'missing-run'" in err
    code, out, err = pgeval("answers", "show", "e2e-run", "--per-query", "--format", "jsonl")
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert {r["query_id"]: r["citation_precision"] for r in rows}["q1"] == 0.5
    code, out, err = pgeval("answers", "show", "e2e-run", "--format", "json")
    assert code == 0 and json.loads(out)[0]["answer_accuracy"] == pytest.approx(4 / 6)
    code, out, err = pgeval(
        "answers", "refusals", "--add", "超出了我的知识范围", "--format", "json"
    )
    assert code == 0 and "超出了我的知识范围" in [r["phrase"] for r in json.loads(out)]
    code, out, err = pgeval("answers", "refusals", "--reset", "--format", "json")
    assert code == 0 and "超出了我的知识范围" not in [r["phrase"] for r in json.loads(out)]
    make_run(e2e, "bare", "e2e", {"q1": ["c1"]})
    code, out, err = pgeval("answers", "show", "bare")
    assert code == 1 and "has no answers" in err
