"""The live service as a stage (issue 13): WeKnora's retrieval nodes called once per query through
a local server that speaks WeKnora's documented API and answers from the test database's own
search (tests/weknora_server.py: real sockets, real JSON). The stored lists are the server's
answers (ids outside the test set included); faults are counted per query with clear messages;
the key appears nowhere; stage-report puts database stages and live nodes side by side."""

from __future__ import annotations

import json
import time

import pytest
from psycopg import sql
from robust_kb import add_target, ensure_table, ensure_testset
from weknora_server import WeKnora

KEY = "sk-LiveKey-7Qx93vZr"
TABLE, N, DEPTH = "sv_kb", 24, 10
NODES = {
    "weknora-vector": "vector",
    "weknora-keyword": "keyword",
    "weknora-hybrid": "hybrid",
    "weknora-final": "final",
}


@pytest.fixture
def kb(clean, conn, monkeypatch):
    ensure_table(conn, TABLE, 300, 8, seed=13)
    ensure_testset(conn, "sv", TABLE, N, 8, n_rows=300, seed=13)
    # texts keyword search can match ("document 17" against bodies "document N")
    conn.execute(
        "UPDATE pgeval.query SET query_text = 'document ' || (substr(query_id, 2)::int "
        "* 7 % 300 + 1)"
    )
    add_target(conn, "sv", TABLE)
    monkeypatch.setenv("PGEVAL_SERVICE_KEY", KEY)
    return conn


@pytest.fixture
def server(kb, database):
    with WeKnora(database, TABLE, "sv", KEY) as srv:
        yield srv


def _opts(url: str, *stages: str, **extra) -> list[str]:
    out = []
    for s in stages:
        out += ["--opt", f"{s}:url={url}", "--opt", f"{s}:knowledge_base_id=kb-1"]
        for k, v in extra.items():
            out += ["--opt", f"{s}:{k}={v}"]
    return out


def _lists(conn, run: str) -> dict[str, list[tuple[str, float]]]:
    out: dict = {}
    for q, c, s in conn.execute(
        "SELECT query_id, chunk_id, score FROM pgeval.result JOIN "
        "pgeval.run USING (run_id) WHERE name = %s ORDER BY query_id, "
        "rank",
        (run,),
    ):
        out.setdefault(q, []).append((c, s))
    return out


def _failures(conn, run: str) -> dict[str, tuple]:
    return {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT f.query_id, f.status, f.message, f.attempts FROM pgeval.query_failure f JOIN "
            "pgeval.run "
            "USING (run_id) WHERE name = %s",
            (run,),
        )
    }


def _everything_stored(conn) -> str:
    """Every row of every table of schema pgeval, as text."""
    names = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pgeval' AND c.relkind = 'r'"
        )
    ]
    return "\n".join(
        str(r[0])
        for t in names
        for r in conn.execute(
            sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier("pgeval", t))
        )
    )


def test_weknora_nodes_beside_database_stages(server, kb, pgeval):
    stages = "exact,hnsw," + ",".join(NODES)
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--target",
        "sv",
        "--stages",
        stages,
        "--repeat",
        "1",
        "--depth",
        str(DEPTH),
        "--name",
        "sv1",
        *_opts(server.url, *NODES),
        "--format",
        "json",
    )
    assert code == 0, err
    # every stored list is exactly the service's answer, in its order, with its scores
    for stage, node in NODES.items():
        got = _lists(kb, f"sv1.{stage}.1")
        want = {qid: lst[:DEPTH] for (n, qid), lst in server.answers.items() if n == node}
        assert len(want) == N and got == want, stage
    ghosts = {
        c
        for lst in _lists(kb, "sv1.weknora-vector.1").values()
        for c, _ in lst
        if c.startswith("ghost-")
    }
    assert not ghosts  # depth 10 < 10 + 1: the ghost is past the cut
    # the requests were WeKnora's documented shapes, with the key in X-API-Key
    bodies = {s["path"]: s["body"] for s in server.seen}
    assert bodies["/api/v1/knowledge-bases/kb-1/hybrid-search"]["match_count"] == DEPTH
    assert bodies["/api/v1/knowledge-search"]["knowledge_base_id"] == "kb-1"
    assert {s["key"] for s in server.seen} == {KEY}
    vec = [s["body"] for s in server.seen if s["body"].get("disable_keywords_match") is True]
    assert vec and vec[0]["disable_vector_match"] is False and "query_text" in vec[0]
    # roles: the service's nodes form their own chain; the database stages stand beside it
    params = dict(
        kb.execute(
            "SELECT stage, params FROM pgeval.run WHERE experiment_id = "
            "(SELECT experiment_id FROM pgeval.experiment WHERE name = 'sv1')"
        )
    )
    assert [params[s]["role"] for s in NODES] == ["ann", "keyword", "merge", "rerank"]
    assert params["weknora-hybrid"]["inputs"] == ["weknora-vector", "weknora-keyword"]
    assert params["weknora-final"]["input"] == "weknora-hybrid"
    assert "X-API-Key" == params["weknora-final"]["service"]["key_header"]
    code, out, err = pgeval("stage-report", "sv1", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert [s["stage"] for s in rep["stages"]] == ["exact", "hnsw", *NODES]
    links = {(c["stage"], c["link"]) for c in rep["chain"]}
    assert links == {
        ("weknora-final", "final"),
        ("weknora-final", "rerank"),
        ("weknora-hybrid", "merge"),
        ("weknora-vector", "path"),
        ("weknora-keyword", "path"),
        ("exact", "exact"),
    }
    cats = {r["category"] for r in rep["loss_attribution"]}
    assert {"index", "reach", "fusion", "rerank", "kept"} <= cats
    # exact search holds every judged chunk (the judgements are its top 3): a loss before the
    # merge is the vector node's, never "reach"
    reach = next(r for r in rep["loss_attribution"] if r["category"] == "reach")
    assert reach["chunks"] == 0
    svc = {s["stage"]: s for s in rep["stages"]}
    assert svc["weknora-vector"]["failures"]["failed"] == 0
    assert svc["weknora-vector"]["timing_boundary"].startswith("HTTP round trip")
    assert svc["weknora-vector"]["timed_queries"] == N
    # the service's vector node is exact search over the same table: index recall 1
    assert svc["weknora-vector"]["index_recall@10"]["mean"] == pytest.approx(1.0)
    # the configuration (URL, preset, body; not the key) is in the fingerprint
    fp = kb.execute("SELECT fingerprint FROM pgeval.experiment WHERE name = 'sv1'").fetchone()[0]
    svc_fp = fp["measurement"]["services"]["weknora-final"]
    assert svc_fp["url"] == server.url + "/api/v1/knowledge-search"
    assert svc_fp["preset"] == "weknora-final" and svc_fp["body"]["query"] == "{{query}}"
    # the key: nowhere in output, the database or the reports
    table = pgeval("stage-report", "sv1")
    assert table[0] == 0 and "weknora-final" in table[1], table[2]
    reports = [pgeval("report", "sv1", "--format", f) for f in ("json", "md", "html")]
    assert all(r[0] == 0 for r in reports), [r[2] for r in reports]
    for text in (
        out,
        err,
        table[1],
        table[2],
        *[r[1] + r[2] for r in reports],
        _everything_stored(kb),
    ):
        assert KEY not in text and KEY[3:12] not in text


def test_ids_outside_the_test_set_are_stored(server, kb, pgeval, monkeypatch):
    from evaluator.stages import service

    entered: list[float] = []  # when each request asked the rate limit for its start
    wait = service.RateLimit.wait

    def timed_wait(self) -> None:
        entered.append(time.monotonic())
        wait(self)

    monkeypatch.setattr(service.RateLimit, "wait", timed_wait)
    code, _out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "weknora-vector",
        "--repeat",
        "1",
        "--depth",
        "50",
        "--name",
        "sv-ghost",
        *_opts(server.url, "weknora-vector", match_count=12, rate=25, concurrency=4),
    )
    assert code == 0, err
    # rate=25: request starts 40 ms apart, even with 4 in flight: 24 requests span >= 0.92 s,
    # from the first request's ask (before its start) to the server's receipt of the last
    # (after its start): a bound no delay of the machine's can break, unlike the first receipt
    # (a request received late, on a loaded machine, shortened the span of receipts)
    starts = sorted(s["at"] for s in server.seen)
    assert len(starts) == N and len(entered) == N
    assert starts[-1] - min(entered) >= (N - 1) / 25 - 1e-6
    got = _lists(kb, "sv-ghost.weknora-vector.1")
    assert all(len(v) == 13 and v[-1] == (f"ghost-{q}", 0.01) for q, v in got.items())
    assert got == {qid: lst for (n, qid), lst in server.answers.items() if n == "vector"}


def test_faults_are_counted_per_query(server, kb, pgeval):
    server.faults = {
        "q2": "timeout",
        "q3": "500",
        "q4": "429",
        "q5": "malformed",
        "q6": "nodata",
        "q7": "429-once",
    }
    # a normal answer has the whole timeout (2 s) however loaded the machine: the test server
    # opens a few database connections per answer; q2 answers after it, never within it
    server.slow_s = 4.0
    t0 = time.monotonic()
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "weknora-final",
        "--repeat",
        "1",
        "--name",
        "sv-faults",
        *_opts(server.url, "weknora-final", timeout=2, retries=1, backoff=0.05, concurrency=3),
    )
    assert code == 0, err
    assert "5 of 24 queries got no answer" in err
    fails = _failures(kb, "sv-faults.weknora-final.1")
    assert set(fails) == {"q2", "q3", "q4", "q5", "q6"}
    assert fails["q2"][0] is None and "no answer within the timeout of 2 s" in fails["q2"][1]
    assert fails["q3"][:1] == (500,) and "HTTP 500: boom" in fails["q3"][1]
    assert (
        fails["q4"][0] == 429 and "failed after 2 attempts: HTTP 429: slow down" in fails["q4"][1]
    )
    assert fails["q5"][0] == 200 and "not JSON" in fails["q5"][1]
    assert fails["q6"][0] == 200 and "the answer has no 'data' (it has: success)" in fails["q6"][1]
    assert all(f[2] == (1 if q in ("q5", "q6") else 2) for q, f in fails.items())
    # failed queries hold no results; the others hold the server's answers
    got = _lists(kb, "sv-faults.weknora-final.1")
    assert not set(got) & set(fails)
    want = {qid: lst for (n, qid), lst in server.answers.items() if n == "final"}
    assert got == {q: v for q, v in want.items() if v}
    # 429 with Retry-After: 1 was honoured, then answered
    q7 = [
        s["at"]
        for s in server.seen
        if s["body"]["query"]
        == kb.execute("SELECT query_text FROM pgeval.query WHERE query_id = 'q7'").fetchone()[0]
    ]
    assert len(q7) == 2 and q7[1] - q7[0] >= 0.95 and "q7" in got
    assert time.monotonic() - t0 < 30
    code, out, err = pgeval("stage-report", "sv-faults", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    f = rep["stages"][0]["failures"]
    assert f["failed"] == 5 and f["queries"] == N
    assert f["by_status"] == {"200": 2, "429": 1, "500": 1, "no answer": 1}
    assert any("5 of 24 queries got no answer from the service" in w for w in rep["warnings"])
    code, out, err = pgeval("stage-report", "sv-faults")
    assert code == 0 and "failed" in out, err
    code, out, err = pgeval("metrics", "sv-faults.weknora-final.1", "--format", "json")
    assert code == 0, err
    assert "5 queries got no answer from the service (first: 'q2'" in err
    assert any("5 queries got no answer" in w for w in json.loads(out)["warnings"])


def test_service_down_stops_and_resume_asks_the_rest(server, kb, pgeval):
    server.faults = {f"q{i}": "500" for i in range(5, 25)}
    code, _, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "weknora-vector",
        "--repeat",
        "1",
        "--name",
        "sv-down",
        *_opts(server.url, "weknora-vector", retries=0, max_consecutive_failures=4),
    )
    assert code == 1
    assert "4 queries in a row got no answer" in err and "pgeval run resume" in err, err
    run = "sv-down.weknora-vector.1"
    assert kb.execute("SELECT status FROM pgeval.run WHERE name = %s", (run,)).fetchone() == (
        "failed",
    )
    assert not _failures(kb, run)  # a down service is not recorded as failed queries
    server.faults = {}
    code, _out, err = pgeval("run", "resume", "sv-down")
    assert code == 0, err
    assert not _failures(kb, run) and len(_lists(kb, run)) == N


def test_wrong_key_stops_at_once_without_showing_it(server, kb, pgeval, monkeypatch):
    monkeypatch.setenv("WK_OTHER", "sk-WrongKey-55Ab")
    code, out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "weknora-final",
        "--repeat",
        "1",
        "--name",
        "sv-key",
        *_opts(server.url, "weknora-final", key_env="WK_OTHER"),
    )
    assert code == 1
    assert "HTTP 401: unauthorized: invalid api key (is the key in WK_OTHER right?)" in err, err
    assert "sk-WrongKey-55Ab" not in err + out
    assert len(server.seen) <= 2  # stopped at the first refusal


def test_body_template_is_filled_structurally():
    from evaluator.stages.service_config import render

    tricky = 'say "}, {\\"x\\": 1} {{query_id}}'
    body = render(
        {
            "q": "{{ query }}",
            "label": "id={{query_id}}",
            "k": "{{match_count}}",
            "v": "{{vector}}",
            "kb": ["{{knowledge_base_id}}"],
            "flag": True,
        },
        {
            "query": tricky,
            "query_id": "q1",
            "match_count": 7,
            "vector": [0.5, 1.0],
            "knowledge_base_id": "kb-1",
        },
    )
    assert body == {
        "q": tricky,
        "label": "id=q1",
        "k": 7,
        "v": [0.5, 1.0],
        "kb": ["kb-1"],
        "flag": True,
    }
    assert json.loads(json.dumps(body))["q"] == tricky


@pytest.mark.parametrize(
    "opts, message",
    [
        (["--opt", "weknora-final:knowledge_base_id=kb-1"], "needs the service's URL"),
        (
            ["--opt", "weknora-final:url=http://u:pw1234@127.0.0.1:9"],
            "holds a user name or password",
        ),
        (["--opt", "weknora-final:url=http://127.0.0.1:9/?api_key=abc123"], "carries a key"),
        (
            ["--opt", "weknora-final:url=http://127.0.0.1:9", "--opt", "weknora-final:key=sk-1"],
            "would write the API key into the experiment's configuration",
        ),
        (
            ["--opt", "weknora-final:url=http://127.0.0.1:9"],
            ("needs --opt weknora-final:knowledge_base_id=ID"),
        ),
        (
            [
                "--opt",
                "weknora-final:url=http://127.0.0.1:9",
                "--opt",
                "weknora-final:knowledge_base_id=kb",
                "--opt",
                "weknora-final:timeout=0",
            ],
            "weknora-final:timeout='0' is not a valid float >= 0.001",
        ),
        (
            [
                "--opt",
                "weknora-final:url=http://127.0.0.1:9",
                "--opt",
                "weknora-final:knowledge_base_id=kb",
                "--opt",
                "weknora-final:key_env=NOPE_UNSET",
            ],
            "environment variable NOPE_UNSET, which is not set",
        ),
        (
            [
                "--opt",
                "weknora-final:url=http://127.0.0.1:9",
                "--opt",
                "weknora-final:knowledge_base_id=kb",
                "--opt",
                'weknora-final:body={"q": "fixed"}',
            ],
            "body does not use the query",
        ),
        (
            [
                "--opt",
                "weknora-final:url=http://127.0.0.1:9",
                "--opt",
                "weknora-final:knowledge_base_id=kb",
                "--opt",
                "weknora-final:body={not json",
            ],
            "weknora-final:body is not JSON",
        ),
        (
            [
                "--opt",
                "weknora-final:url=http://127.0.0.1:9",
                "--opt",
                "weknora-final:knowledge_base_id=kb",
                "--opt",
                "weknora-final:concurrency=0",
            ],
            "weknora-final:concurrency='0' is not a valid int >= 1",
        ),
    ],
)
def test_configuration_errors_are_one_line(kb, pgeval, opts, message):
    before = kb.execute("SELECT count(*) FROM pgeval.run").fetchone()[0]
    code, _out, err = pgeval(
        "run", "pipeline", "--testset", "sv", "--stages", "weknora-final", "--repeat", "1", *opts
    )
    assert code == 1 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "pw1234" not in err and "abc123" not in err
    assert kb.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == before


def test_generic_form_with_vector_and_nested_paths(server, kb, pgeval):
    body = json.dumps({"q": {"text": "{{query}}", "vec": "{{vector}}"}, "k": "{{match_count}}"})
    code, _out, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "gen=service",
        "--repeat",
        "1",
        "--depth",
        "5",
        "--name",
        "sv-gen",
        "--opt",
        f"gen:url={server.url}/generic/search",
        "--opt",
        f"gen:body={body}",
        "--opt",
        "gen:list=result.items",
        "--opt",
        "gen:id=chunk.id",
        "--opt",
        "gen:score=relevance",
        "--opt",
        "gen:role=ann",
    )
    assert code == 0, err
    assert {s["auth"] for s in server.seen} == {f"Bearer {KEY}"}
    got = _lists(kb, "sv-gen.gen.1")
    assert got == {qid: lst[:5] for (n, qid), lst in server.answers.items() if n == "generic"}
    assert len(got) == N


def _metrics(pgeval, run: str):
    code, out, err = pgeval("metrics", run, "--format", "json", "--per-query")
    assert code == 0, err
    code2, out2, err2 = pgeval("metrics", run, "--format", "json")
    assert code2 == 0, err2
    return json.loads(out2)["summary"], json.loads(out)


def _progress(conn, run: str) -> int:
    return conn.execute(
        "SELECT count(p.*) FROM pgeval.run r LEFT JOIN pgeval.run_progress p "
        "USING (run_id) WHERE r.name = %s",
        (run,),
    ).fetchone()[0]


def test_kill_9_and_resume_equals_uninterrupted(server, kb, pgeval):
    import os
    import signal
    import subprocess
    import sys
    import threading
    from pathlib import Path

    stages = "weknora-vector,weknora-final"
    args = [
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        stages,
        "--repeat",
        "1",
        "--depth",
        str(DEPTH),
        *_opts(server.url, "weknora-vector", "weknora-final"),
    ]
    code, _, err = pgeval(*args, "--name", "sv-ref")
    assert code == 0, err
    # the client is killed mid-stage, deterministically: once the stage has written progress
    # (its first flush, store.FLUSH_SECONDS after its start: 0.15 s an answer, so with answers to
    # come), the server holds its next request until the client is dead. (Racing the stage's
    # last second by polling could miss it on a loaded machine.)
    at_hold, release = threading.Event(), threading.Event()

    def hold() -> None:
        with server.database.connect(autocommit=True) as c:
            if _progress(c, "sv-kill.weknora-vector.1") > 0:
                at_hold.set()
                release.wait(120)

    server.delay_s, server.hold = 0.15, hold
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluator", *args, "--name", "sv-kill"],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not at_hold.wait(0.02):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached mid-run"
        assert 0 < _progress(kb, "sv-kill.weknora-vector.1") < N - 5
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        server.hold = None
        release.set()
        if proc.poll() is None:
            proc.kill()
    server.delay_s = 0.0
    done = _progress(kb, "sv-kill.weknora-vector.1")
    assert 0 < done < N
    before = len(server.seen)
    code, _out, err = pgeval("run", "resume", "sv-kill")
    assert code == 0, err
    asked = [s for s in server.seen[before:] if s["body"].get("disable_keywords_match")]
    assert len(asked) == N - done  # only the unanswered queries were asked again
    for stage in ("weknora-vector", "weknora-final"):
        ref, got = f"sv-ref.{stage}.1", f"sv-kill.{stage}.1"
        assert _lists(kb, got) == _lists(kb, ref)
        # the same lists; the means may differ in the last bit (summation order)
        assert _metrics(pgeval, got)[0] == pytest.approx(_metrics(pgeval, ref)[0], rel=1e-12)
        per_query = [_metrics(pgeval, r)[1] for r in (got, ref)]
        assert len(per_query[0]) == N
        assert [
            {k: v for k, v in q.items() if "run" not in k and "latency" not in k}
            for q in per_query[0]
        ] == [
            {k: v for k, v in q.items() if "run" not in k and "latency" not in k}
            for q in per_query[1]
        ]
        assert _progress(kb, got) == N


def test_connection_refused_is_retried_then_stops(kb, pgeval):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t0 = time.monotonic()
    code, _, err = pgeval(
        "run",
        "pipeline",
        "--testset",
        "sv",
        "--stages",
        "weknora-final",
        "--repeat",
        "1",
        "--name",
        "sv-refused",
        *_opts(
            f"http://127.0.0.1:{port}",
            "weknora-final",
            retries=2,
            backoff=0.05,
            max_consecutive_failures=3,
        ),
    )
    assert code == 1
    assert "3 queries in a row got no answer" in err and "failed after 3 attempts" in err, err
    assert "refused" in err.lower(), err
    assert time.monotonic() - t0 >= 3 * (0.05 + 0.1) * 0.9  # the backoff was waited


def test_retry_after_seconds_and_http_date():
    from email.utils import formatdate

    from evaluator.providers.http_json import retry_after

    assert retry_after("2") == 2.0 and retry_after("-3") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None
    assert 8.0 <= retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10.0
    assert retry_after(formatdate(time.time() - 10, usegmt=True)) == 0.0
