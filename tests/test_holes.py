"""`pgeval testset holes` and `pgeval testset grade` on the real server, after a real pipeline
(exact, hnsw, bm25, merge; two repetitions) over a small table with text: the pool file equals
a hand count of the unjudged chunks of every run's top 10, its cells are safe for spreadsheets,
the grades read back make a new version whose judgements are the old ones plus the file's; a
model judge (a local OpenAI-compatible /v1/chat/completions) grades apart, and its kappa and
confusion table equal a hand computation (docs/judging.md)."""

from __future__ import annotations

import csv
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from helpers import make_testset

from evaluator.core.spreadsheet import cell, value

TABLE, N_DOCS, DIM = "holes_docs", 80, 8
WORDS = "wing flow layer shock heat plate jet drag lift mach vortex panel".split()
KEY = "sk-judge-0123456789abcdef"


@pytest.fixture(scope="module")
def setup(database):
    """Test set ``hs`` (8 queries, 2 judged chunks each), target ``hs`` (text in ``body``, half
    of it starting with a spreadsheet formula character), experiment ``hx``."""
    from click.testing import CliRunner

    from evaluator.cli import main

    rng = np.random.default_rng(5)
    docs = rng.normal(size=(N_DOCS, DIM))
    queries = rng.normal(size=(8, DIM))
    with database.connect(autocommit=True) as conn:
        conn.execute(
            "TRUNCATE pgeval.testset, pgeval.target, pgeval.result_list RESTART IDENTITY CASCADE"
        )
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, emb vector({DIM}), body text)")
        for i, v in enumerate(docs):
            words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(6))
            body = ("=SUM(A1) " if i % 2 else "@") + words if i % 4 < 2 else words
            conn.execute(
                f"INSERT INTO {TABLE} VALUES (%s, %s, %s)",
                (f"d{i}", "[" + ",".join(map(str, v)) + "]", body),
            )
        conn.execute(f"CREATE INDEX ON {TABLE} USING hnsw (emb vector_cosine_ops)")
        conn.execute(f"CREATE INDEX ON {TABLE} USING bm25 (body) WITH (text_config = 'english')")
        nearest = np.argsort(-(queries @ docs.T), axis=1)
        make_testset(
            conn,
            "hs",
            {f"q{j}": {f"d{nearest[j][0]}": 3, f"d{nearest[j][5]}": 0} for j in range(8)},
            texts={f"q{j}": ("+" if j == 0 else "") + " ".join(WORDS[j : j + 3]) for j in range(8)},
            embeddings={f"q{j}": queries[j] for j in range(8)},
        )

    def cli(*args):
        with CliRunner().isolation() as streams:
            code = main(list(args))
        assert code == 0, streams[1].getvalue().decode()

    cli("target", "add", "hs", "--table", TABLE, "--id-column", "id", "--vector-column", "emb",
        "--text-column", "body")  # fmt: skip
    cli("run", "pipeline", "--testset", "hs", "--target", "hs", "--stages",
        "exact,hnsw,bm25,merge", "--depth", "20", "--repeat", "2", "--name", "hx")  # fmt: skip
    return database


def read_pool(path: Path) -> list[dict]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def hand_holes(conn, depth=10) -> dict[tuple[str, str], dict[str, int]]:
    """(query, chunk) -> {stage: best rank} of every unjudged chunk in a top ``depth``."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    judged = set(conn.execute("SELECT query_id, chunk_id FROM pgeval.qrel").fetchall())
    for stage, q, c, rank in conn.execute(
        "SELECT r.stage, x.query_id, x.chunk_id, x.rank FROM pgeval.result x JOIN pgeval.run r "
        "USING (run_id) JOIN pgeval.experiment e USING (experiment_id) WHERE e.name = 'hx'"
    ).fetchall():
        if rank <= depth and (q, c) not in judged:
            seen = out.setdefault((q, c), {})
            seen[stage] = min(rank, seen.get(stage, rank))
    return out


@pytest.fixture(scope="module")
def pool(setup, tmp_path_factory):
    from evaluator.api import Pgeval

    path = tmp_path_factory.mktemp("holes") / "pool.csv"
    report = Pgeval(setup).testset_holes("hx", path, depth=10)
    return path, report


def test_holes_equal_a_hand_count(setup, pool, conn):
    path, report = pool
    rows = read_pool(path)
    expected = hand_holes(conn)
    assert len(expected) > 20 and report.as_dict()["holes"] == len(expected)
    assert {(value(r["query_id"]), value(r["chunk_id"])) for r in rows} == set(expected)
    position = dict(conn.execute("SELECT query_id, position FROM pgeval.query").fetchall())
    body = dict(conn.execute(f"SELECT id, body FROM {TABLE}").fetchall())
    qtext = dict(conn.execute("SELECT query_id, query_text FROM pgeval.query").fetchall())
    for r in rows:
        q, c = value(r["query_id"]), value(r["chunk_id"])
        seen = sorted(expected[q, c].items(), key=lambda s: (s[1], s[0]))
        assert r["seen_at"] == " ".join(f"{s}:{k}" for s, k in seen)
        assert value(r["chunk"]) == body[c] and value(r["query"]) == qtext[q]
        assert r["testset"] == "hs" and r["grade"] == ""
    order = [
        (position[value(r["query_id"])], min(expected[value(r["query_id"]), value(r["chunk_id"])].values()), value(r["chunk_id"]))
        for r in rows
    ]  # fmt: skip
    assert order == sorted(order)
    pooled = {
        (q, c)
        for q, c, rank in conn.execute(
            "SELECT x.query_id, x.chunk_id, x.rank FROM pgeval.result x JOIN pgeval.run r "
            "USING (run_id) JOIN pgeval.experiment e USING (experiment_id) WHERE e.name = 'hx'"
        ).fetchall()
        if rank <= 10
    }
    assert report.pooled == len(pooled)


def test_holes_in_words(setup, pool, pgeval, tmp_path):
    path, report = pool
    code, out, err = pgeval("testset", "holes", "hx", "--out", str(tmp_path / "p.csv"))
    assert code == 0, err
    assert (tmp_path / "p.csv").read_bytes() == path.read_bytes()
    assert f"{report.pooled} distinct chunks, {len(report.holes)} of them unjudged" in out
    assert "fill its 'grade' column (0-3), then `pgeval testset grade " in out


def test_pool_cells_are_safe_in_a_spreadsheet(pool):
    path, _ = pool
    rows = read_pool(path)
    texts = [r["chunk"] for r in rows] + [r["query"] for r in rows]
    assert any(t.startswith("'=SUM") for t in texts) and any(t.startswith("'@") for t in texts)
    assert any(t.startswith("'+") for t in texts)  # query q0's text
    assert not any(t.startswith(("=", "+", "-", "@")) for r in rows for t in r.values())
    for text in ("-12", "=1+1", "'quoted", "''x", "@a", "plain", "+", "\tx"):
        assert value(cell(text)) == text


def graded_copy(src: Path, dst: Path, grades: dict[int, str]) -> list[dict]:
    rows = read_pool(src)
    for i, g in grades.items():
        rows[i]["grade"] = g
    with open(dst, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def qrels(conn, name: str) -> dict[tuple[str, str], tuple[int, str]]:
    return {
        (q, c): (g, s)
        for q, c, g, s in conn.execute(
            "SELECT j.query_id, j.chunk_id, j.grade, j.source FROM pgeval.qrel j "
            "JOIN pgeval.testset t USING (testset_id) WHERE t.name = %s",
            (name,),
        ).fetchall()
    }


def test_grade_round_trip_makes_a_new_version(setup, pool, conn, pgeval, tmp_path):
    path, _ = pool
    graded = tmp_path / "graded.csv"
    rows = graded_copy(path, graded, {0: "3", 1: "0", 2: " 2 ", 4: "1"})
    before = qrels(conn, "hs")
    code, out, err = pgeval("testset", "grade", str(graded), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["name"], doc["version"], doc["parent"]) == ("hs@v2", 2, "hs")
    assert (doc["human"], doc["model"], doc["ungraded"]) == (4, 0, len(rows) - 4)
    added = {
        (value(rows[i]["query_id"]), value(rows[i]["chunk_id"])): (int(g), "human")
        for i, g in {0: 3, 1: 0, 2: 2, 4: 1}.items()
    }
    assert qrels(conn, "hs@v2") == {**before, **added} and qrels(conn, "hs") == before
    assert doc["judgements"] == len(before) + 4
    code, out, _ = pgeval("testset", "show", "hs@v2", "--format", "json")
    shown = json.loads(out)
    assert (shown["version"], shown["parent"], shown["sources"]) == (
        2,
        "hs",
        {"human": len(before) + 4},
    )
    # the parent's queries and stored embeddings come along; the old runs keep their test set
    for table in ("pgeval.query", "pgeval.query_embedding"):
        counts = conn.execute(
            f"SELECT t.name, count(*) FROM {table} JOIN pgeval.testset t USING (testset_id) "
            "GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert counts[0][1] == counts[1][1] > 0, (table, counts)
    code, out, err = pgeval("testset", "grade", str(graded))
    assert code == 0 and "holds these grades already" in out, (out, err)
    assert conn.execute("SELECT count(*) FROM pgeval.testset").fetchone()[0] == 2
    # a chunk judged already in the version graded is refused, nothing written
    code, out, err = pgeval("testset", "grade", str(graded), "--testset", "hs@v2")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert f"{graded}:2, field 'grade': query " in err and "is judged already" in err
    conn.execute("DELETE FROM pgeval.testset WHERE name = 'hs@v2'")


class Judge:
    """A local OpenAI-compatible /v1/chat/completions: grades by a rule on the passage (its
    length), answering as a chat model does ("2"), or with ``bad`` for one passage."""

    def __init__(self, bad: str | None = None):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                passage = body["messages"][1]["content"].split("Passage: ", 1)[1]
                grade = str(len(passage) % 4)
                content = "maybe" if bad and bad in passage else grade
                raw = json.dumps(
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def expected_grade(conn, q: str, c: str) -> int:
    from evaluator.providers.judge import USER

    body = conn.execute(f"SELECT body FROM {TABLE} WHERE id = %s", (c,)).fetchone()[0]
    query = conn.execute("SELECT query_text FROM pgeval.query WHERE query_id = %s", (q,)).fetchone()
    passage = USER.format(query=query[0], passage=body).split("Passage: ", 1)[1]
    return len(passage) % 4


def test_judge_grades_apart_and_its_kappa_is_measured(
    setup, pool, conn, pgeval, tmp_path, monkeypatch
):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    out_file = tmp_path / "judged.csv"
    with Judge() as judge:
        code, out, err = pgeval(
            "testset", "holes", "hx", "--out", str(out_file), "--judge", "openai:tiny",
            "--base-url", judge.url, "--api-key-env", "JUDGE_KEY", "--format", "json",
        )  # fmt: skip
    assert code == 0, err
    assert KEY not in out + err
    assert {r["path"] for r in judge.requests} == {"/v1/chat/completions"}
    assert {r["auth"] for r in judge.requests} == {f"Bearer {KEY}"}
    assert all(
        r["body"]["model"] == "tiny" and r["body"]["temperature"] == 0 for r in judge.requests
    )
    doc = json.loads(out)
    assert read_pool(out_file) == read_pool(pool[0])  # the file is the people's: no model grade
    # stored apart: every pooled chunk graded by the model, no judgement changed
    model = {
        (q, c): g
        for q, c, g in conn.execute(
            "SELECT query_id, chunk_id, grade FROM pgeval.model_grade WHERE judge = 'openai:tiny'"
        ).fetchall()
    }
    assert len(model) == doc["pooled"] == len(judge.requests)
    assert all(model[k] == expected_grade(conn, *k) for k in model)
    assert (
        conn.execute("SELECT count(*) FROM pgeval.qrel WHERE source <> 'human'").fetchone()[0] == 0
    )
    # agreement by hand on the judged chunks of the pool
    human = dict(
        ((q, c), g)
        for q, c, g in conn.execute("SELECT query_id, chunk_id, grade FROM pgeval.qrel").fetchall()
    )
    pairs = np.array([(human[k], model[k]) for k in model if k in human])
    assert len(pairs) >= 5
    confusion = np.zeros((4, 4), dtype=int)
    for h, m in pairs:
        confusion[h, m] += 1
    n = confusion.sum()
    p_o = np.trace(confusion) / n
    p_e = (confusion.sum(axis=1) @ confusion.sum(axis=0)) / n**2
    kappa = (p_o - p_e) / (1 - p_e)
    got = doc["agreement"]
    assert got["compared"] == n and got["agreed"] == np.trace(confusion)
    assert got["kappa"] == pytest.approx(kappa, abs=1e-12)
    assert {(c["human"], c["model"]): c["n"] for c in got["confusion"]} == {
        (h, m): confusion[h, m] for h in range(4) for m in range(4) if confusion[h, m]
    }
    # the model's grades enter a version only when asked, marked as the judge's, agreement first
    graded = tmp_path / "graded.csv"
    rows = graded_copy(out_file, graded, {0: "2"})
    code, out, err = pgeval(
        "testset", "grade", str(graded), "--name", "hs-human", "--format", "json"
    )
    assert code == 0 and (json.loads(out)["human"], json.loads(out)["model"]) == (1, 0), err
    assert {v[1] for v in qrels(conn, "hs-human").values()} == {"human"}  # never without asking
    conn.execute("DELETE FROM pgeval.testset WHERE name = 'hs-human'")
    code, out, err = pgeval(
        "testset", "grade", str(graded), "--model-grades", "openai:tiny", "--name", "hs-model"
    )
    assert code == 0, err
    assert out.index("Cohen's kappa") < out.index("wrote test set 'hs-model'")
    first = (value(rows[0]["query_id"]), value(rows[0]["chunk_id"]))
    expected = {
        **qrels(conn, "hs"),
        **{(value(r["query_id"]), value(r["chunk_id"])): None for r in rows[1:]},
        first: (2, "human"),
    }
    expected = {k: v or (model[k], "openai:tiny") for k, v in expected.items()}
    assert qrels(conn, "hs-model") == expected
    code, out, _ = pgeval("testset", "show", "hs-model")
    n_model = sum(1 for v in expected.values() if v[1] != "human")
    assert f"(human {len(expected) - n_model}, openai:tiny {n_model})" in out
    conn.execute("DELETE FROM pgeval.testset WHERE name = 'hs-model'")


def test_a_judge_answer_that_is_no_grade_stops_everything(
    setup, pool, conn, pgeval, tmp_path, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = conn.execute("SELECT count(*) FROM pgeval.model_grade").fetchone()[0]
    path = tmp_path / "p.csv"
    with Judge(bad="mach") as judge:
        code, out, err = pgeval(
            "testset", "holes", "hx", "--out", str(path), "--judge", "openai:odd",
            "--base-url", judge.url, "--api-key-env", "",
        )  # fmt: skip
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "field '--judge': judge openai:odd answered query '" in err
    assert "with 'maybe', not a grade 0-3" in err and "Traceback" not in err
    assert not path.exists() and list(tmp_path.iterdir()) == []
    assert conn.execute("SELECT count(*) FROM pgeval.model_grade").fetchone()[0] == before


def test_the_prompt_is_documented():
    from evaluator.providers.judge import SYSTEM, USER

    doc = (Path(__file__).parent.parent / "docs" / "judging.md").read_text(encoding="utf-8")
    assert SYSTEM in doc and USER in doc
