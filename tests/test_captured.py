"""`pgeval queries capture` on the real server's log: an "application" (a login role whose
statements the server logs) sends searches of three shapes (prepared with binary parameters,
inline literals as psycopg 2 and most ORMs send them, a tenant filter with the vector in $2);
the captured set holds exactly the distinct searches sent, their shapes, filter values and
frequencies; each shape measured as the application sent it agrees with numpy's exact search;
csvlog and jsonlog of a server with logging_collector read the same; a log whose parameters
are missing or cut is refused in one line."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

TABLE, ROLE, DIM, K = "cap_kb", "pgeval_capture_app", 16, 10
TENANTS = {"a": 0.6, "b": 0.3, "c": 0.1}


def vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(v, dtype=np.float32)) + "]"


def _rows(n: int, rng) -> tuple[np.ndarray, list[str]]:
    centers = rng.normal(size=(20, DIM))
    docs = (centers[rng.integers(0, 20, n)] + 0.4 * rng.normal(size=(n, DIM))).astype(np.float32)
    tenants = list(rng.choice(list(TENANTS), size=n, p=list(TENANTS.values())))
    return docs, tenants


def _queries(n: int, rng) -> np.ndarray:
    centers = rng.normal(size=(20, DIM))
    return (centers[rng.integers(0, 20, n)] + 0.4 * rng.normal(size=(n, DIM))).astype(np.float32)


def _log_path(database) -> Path:
    return Path(database.datadir) / "log"


def _wait_logged(path: Path, start: int, needle: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with path.open("rb") as f:
            f.seek(start)
            if needle.encode() in f.read():
                return
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} never reached {path}")


def _app(database, role: str) -> str:
    return make_conninfo(database.uri(), user=role)


def _send(uri: str, qa, qb, qc, tenants_c) -> None:
    """The application: shape A prepared and binary (psycopg 3), shape B inline literals (a
    client-side cursor, as psycopg 2 sends), shape C a tenant filter with the vector in $2."""
    from evaluator.core.vector_types import register_vector

    with psycopg.connect(uri, autocommit=True) as app:
        register_vector(app)
        for i, v in enumerate(qa):
            for _ in range(2 if i < 5 else 1):  # the first five sent twice
                app.execute(
                    f"SELECT id FROM {TABLE} ORDER BY emb <=> %s LIMIT {K}",
                    (v,),
                    prepare=True,
                    binary=True,
                )
        cur = psycopg.ClientCursor(app)
        for v in qb:
            cur.execute(
                f"SELECT id FROM {TABLE} ORDER BY emb <=> %s::vector LIMIT {K}", (vtext(v),)
            )
        for v, t in zip(qc, tenants_c, strict=True):
            app.execute(
                f"SELECT id FROM {TABLE} WHERE tenant = %s ORDER BY emb <=> %s LIMIT %s",
                (t, vtext(v), K),
            )
        app.execute(f"SELECT count(*) FROM {TABLE}")  # not a search
        app.execute("SELECT 'the application is done'")


@pytest.fixture(scope="module")
def app_log(database, tmp_path_factory):
    """(log file of the application's searches, docs, tenants, what was sent per shape)."""
    rng = np.random.default_rng(47)
    docs, tenants = _rows(4000, rng)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, tenant text, emb vector({DIM}))")
        with c.cursor().copy(f"COPY {TABLE} (id, tenant, emb) FROM STDIN") as cp:
            for i, (v, t) in enumerate(zip(docs, tenants, strict=True)):
                cp.write_row((i, t, vtext(v)))
        c.execute(
            f"CREATE INDEX ON {TABLE} USING hnsw (emb vector_cosine_ops) WITH (m = 4, ef_construction = 8)"
        )
        c.execute(f"CREATE INDEX ON {TABLE} (tenant)")
        c.execute(f"ANALYZE {TABLE}")
        c.execute(
            f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN "
            f"CREATE ROLE {ROLE} LOGIN; END IF; END$$"
        )
        c.execute(f"GRANT SELECT ON {TABLE} TO {ROLE}")
        c.execute(f"ALTER ROLE {ROLE} SET log_min_duration_statement = 0")
    qa, qb, qc = _queries(40, rng), _queries(30, rng), _queries(30, rng)
    tenants_c = [list(TENANTS)[i % 3] for i in range(30)]
    log = _log_path(database)
    start = log.stat().st_size
    _send(_app(database, ROLE), qa, qb, qc, tenants_c)
    _wait_logged(log, start, "the application is done")
    out = tmp_path_factory.mktemp("captured") / "app.log"
    with log.open("rb") as f, out.open("wb") as g:
        f.seek(start)
        g.write(f.read())
    return {
        "log": out,
        "docs": docs,
        "tenants": np.asarray(tenants),
        "sent": {1: qa, 2: qb, 3: qc},
        "tenants_c": tenants_c,
    }


@pytest.fixture(scope="module")
def captured(database, app_log):
    from click.testing import CliRunner

    from evaluator.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        with CliRunner().isolation() as streams:
            code = main(list(argv))
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()

    code, _, err = run("target", "add", "cap", "--table", TABLE, "--id-column", "id",
                       "--vector-column", "emb", "--replace")  # fmt: skip
    assert code == 0, err
    code, out, err = run("queries", "capture", str(app_log["log"]), "--target", "cap", "--name",
                         "app", "--replace", "--format", "json")  # fmt: skip
    assert code == 0, err
    return json.loads(out), run


def _exact(docs, q, k, mask=None) -> set[int]:
    d = 1 - (docs @ q) / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))
    if mask is not None:
        d = np.where(mask, d, np.inf)
    return set(np.argsort(d, kind="stable")[:k].tolist())


def test_capture_keeps_exactly_the_searches_sent(database, app_log, captured):
    report, _ = captured
    assert report["queries"] == report["found"] == 40 + 30 + 30
    assert report["searches"] == 45 + 30 + 30  # five of shape A sent twice
    shapes = {s["shape"]: s for s in report["shapes"]}
    assert len(shapes) == 3
    assert shapes[1]["statement"] == f"SELECT id FROM {TABLE} ORDER BY emb <=> $1 LIMIT {K}"
    assert shapes[2]["statement"] == f"SELECT id FROM {TABLE} ORDER BY emb <=> $1::vector LIMIT {K}"
    assert shapes[3]["statement"] == (
        f"SELECT id FROM {TABLE} WHERE tenant = $2 ORDER BY emb <=> $1 LIMIT $3"
    )
    assert [shapes[i]["k"] for i in (1, 2, 3)] == [K, K, K]
    assert shapes[3]["filters"] == {"tenant": 2}
    # every prepared execution logs a bind line besides its execute line: never counted twice
    assert report["skipped"]["bind or parse line (its execute line is the search)"] >= 45 + 30
    with database.connect() as c:
        for shape, sent in app_log["sent"].items():
            got = c.execute(
                "SELECT q.vector, q.params, q.sent FROM pgeval.captured_query q JOIN "
                "pgeval.captured_set s USING (set_id) WHERE s.name = 'app' AND q.shape = %s",
                (shape,),
            ).fetchall()
            assert len(got) == len(sent)
            # each vector sent is one query (float4 text round trip: equal as float32)
            key = {np.asarray(v, dtype=np.float32).tobytes(): (p, n) for v, p, n in got}
            for i, v in enumerate(sent):
                params, n = key[np.asarray(v, dtype=np.float32).tobytes()]
                assert n == (2 if shape == 1 and i < 5 else 1)
                if shape == 3:
                    assert params == [app_log["tenants_c"][i], str(K)]


def test_measure_each_shape_as_sent_agrees_with_numpy(database, app_log, captured):
    _, run = captured
    code, out, err = run("queries", "measure", "app", "--param", "hnsw.ef_search=10,40",
                         "--sweep", "cap-measure", "--replace", "--format", "json")  # fmt: skip
    assert code == 0, err
    measured = json.loads(out)
    rows = measured["rows"]
    assert {(r["shape"], r["point"]) for r in rows} == {(s, p) for s in (1, 2, 3) for p in (1, 2)}
    docs, tenants = app_log["docs"], app_log["tenants"]
    uri = database.uri()
    with psycopg.connect(uri, autocommit=True) as kb:
        for r in rows:
            ef = 10 if "10" in r["label"] else 40
            kb.execute(f"SET hnsw.ef_search = {ef}")
            recalls = []
            for i, q in enumerate(app_log["sent"][r["shape"]]):
                if r["shape"] == 3:
                    t = app_log["tenants_c"][i]
                    got = kb.execute(
                        f"SELECT id FROM {TABLE} WHERE tenant = %s ORDER BY emb <=> %s LIMIT {K}",
                        (t, vtext(q)),
                    ).fetchall()
                    truth = _exact(docs, q, K, tenants == t)
                else:
                    got = kb.execute(
                        f"SELECT id FROM {TABLE} ORDER BY emb <=> %s::vector LIMIT {K}", (vtext(q),)
                    ).fetchall()
                    truth = _exact(docs, q, K)
                recalls.append(len({g[0] for g in got} & truth) / K)
            assert r["recall"] == pytest.approx(float(np.mean(recalls)), abs=1e-9), r
            assert r["n_queries"] == len(app_log["sent"][r["shape"]])
    low = [r for r in rows if r["point"] == 1]
    assert min(r["recall"] for r in low) < 1.0  # the index is approximate at ef_search 10
    every = [p for p in (1, 2) if all(r["recall"] >= 0.95 for r in rows if r["point"] == p)]
    labels = {r["point"]: r["label"] for r in rows}
    assert measured["verdict"]["point"] == (labels[every[0]] if every else None)
    shares = {1: 45 / 105, 2: 30 / 105, 3: 30 / 105}
    for p in (1, 2):
        at = [r for r in rows if r["point"] == p]
        want = sum(r["recall"] * shares[r["shape"]] for r in at)
        assert all(r["weighted_recall"] == pytest.approx(want, abs=1e-12) for r in at)


def test_list_show_export_delete(captured, tmp_path):
    _, run = captured
    code, out, _ = run("queries", "list", "--format", "json")
    assert code == 0
    (row,) = [r for r in json.loads(out) if r["name"] == "app"]
    assert (row["target"], row["shapes"], row["queries"], row["sent"]) == ("cap", 3, 100, 105)
    code, out, _ = run("queries", "show", "app", "--format", "json")
    shown = json.loads(out)
    assert sorted(v["params"][0] for v in shown["values"]) == ["a", "b", "c"]
    assert sum(v["queries"] for v in shown["values"]) == 30
    code, out, err = run("queries", "export", "app", "--out", str(tmp_path / "q.npy"))
    assert code == 0, err
    assert np.load(tmp_path / "q.npy").shape == (100, DIM)
    code, _, _ = run("queries", "export", "app", "--shape", "3", "--out", str(tmp_path / "q.jsonl"))
    lines = [json.loads(x) for x in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert len(lines) == 30 and all(x["shape"] == 3 and len(x["embedding"]) == DIM for x in lines)
    code, _, _ = run("queries", "capture", "--how")
    assert code == 0
    code, _, err = run("queries", "show", "nope")
    assert code == 1 and err.count("\n") == 1 and "no captured set 'nope'" in err


def test_append_adds_counts_and_window_takes_the_newest(database, app_log, captured, tmp_path):
    _, run = captured
    log = app_log["log"]
    for extra in ([], ["--append"]):
        code, out, err = run("queries", "capture", str(log), "--target", "cap", "--name",
                             "twice", "--format", "json", "--replace" if not extra else "--append")  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["appended"] == bool(extra)
    with database.connect() as c:
        total = c.execute(
            "SELECT sum(sent), count(*) FROM pgeval.captured_query JOIN pgeval.captured_set "
            "USING (set_id) WHERE name = 'twice'"
        ).fetchone()
    assert tuple(total) == (2 * 105, 100)
    code, out, err = run("queries", "capture", str(log), "--target", "cap", "--name", "some",
                         "--max", "7", "--replace", "--format", "json")  # fmt: skip
    assert code == 0 and json.loads(out)["queries"] == 7
    code, out2, _ = run("queries", "capture", str(log), "--target", "cap", "--name", "some",
                        "--max", "7", "--replace", "--format", "json")  # fmt: skip
    with database.connect() as c:
        ids = c.execute(
            "SELECT query_id FROM pgeval.captured_queries('some') ORDER BY 1"
        ).fetchall()
    assert len(ids) == 7  # reproducible: the same seven


def test_a_log_without_whole_vectors_is_refused(database, app_log, tmp_path, captured):
    _, run = captured
    role = ROLE + "_cut"
    with database.connect(results=False, autocommit=True) as c:
        c.execute(
            f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
            f"CREATE ROLE {role} LOGIN; END IF; END$$"
        )
        c.execute(f"GRANT SELECT ON {TABLE} TO {role}")
        c.execute(f"ALTER ROLE {role} SET log_min_duration_statement = 0")
    log = _log_path(database)
    for length in ("0", "40"):
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f"ALTER ROLE {role} SET log_parameter_max_length = {length}")
        start = log.stat().st_size
        q = app_log["sent"][1][:3]
        _send(_app(database, role), q, [], [], [])
        _wait_logged(log, start, "the application is done")
        cut = tmp_path / f"cut{length}.log"
        with log.open("rb") as f:
            f.seek(start)
            cut.write_bytes(f.read())
        code, out, err = run("queries", "capture", str(cut), "--target", "cap", "--name", "cut")
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "log_parameter_max_length" in err, err
        assert str(cut) in err
    with database.connect() as c:
        assert (
            c.execute("SELECT count(*) FROM pgeval.captured_set WHERE name = 'cut'").fetchone()[0]
            == 0
        )
    empty = tmp_path / "nothing.log"
    empty.write_text("2026-12-07 08:00:00.000 UTC [1] LOG:  database system is ready\n")
    code, _, err = run("queries", "capture", str(empty), "--target", "cap", "--name", "cut")
    assert code == 1 and err.count("\n") == 1 and "no search of target 'cap'" in err


def test_csvlog_jsonlog_and_a_custom_prefix(tmp_path, captured):
    """A server of its own with logging_collector on: stderr (a custom log_line_prefix, read from
    the server), csvlog and jsonlog (gzip too) hold the same searches."""
    import tempfile

    from click.testing import CliRunner

    from evaluator.cli import main
    from evaluator.core import server

    # not under pytest's tmp_path (mode 700 to its owner): a root run starts the server as user
    # pgserver, which must reach its data directory, as for the session's (tests/conftest.py)
    top = Path(tempfile.mkdtemp(prefix="pgeval-captured-"))
    datadir = top / "pg"
    uri = server.start(datadir)
    try:
        with psycopg.connect(uri, autocommit=True) as c:
            c.execute("ALTER SYSTEM SET logging_collector = on")
            c.execute("ALTER SYSTEM SET log_destination = 'stderr,csvlog,jsonlog'")
            c.execute("ALTER SYSTEM SET log_directory = 'logs'")
            c.execute("ALTER SYSTEM SET log_line_prefix = '%t [%p]: user=%u,db=%d,app=%a '")
        server.stop(datadir)
        uri = server.start(datadir)
        rng = np.random.default_rng(5)
        docs, tenants = _rows(300, rng)
        with psycopg.connect(uri, autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")
            c.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, tenant text, emb vector({DIM}))")
            for i, (v, t) in enumerate(zip(docs, tenants, strict=True)):
                c.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, %s)", (i, t, vtext(v)))
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
            c.execute(f"GRANT SELECT ON {TABLE} TO {ROLE}")
            c.execute(f"ALTER ROLE {ROLE} SET log_min_duration_statement = 0")
        qa = _queries(12, rng)
        _send(make_conninfo(uri, user=ROLE), qa, qa[:3], qa[:4], ["a", "b", "c", "a"])
        logs = datadir / "logs"
        for suffix in (".csv", ".json", ".log"):
            (path,) = logs.glob("*" + suffix)
            _wait_logged(path, 0, "the application is done")
        (csv_path,) = logs.glob("*.csv")
        gz = tmp_path / "pg.csv.gz"
        with csv_path.open("rb") as f, gzip.open(gz, "wb") as g:
            shutil.copyfileobj(f, g)
        env_db = {"PGEVAL_DSN": uri}

        def run(*argv: str) -> tuple[int, str, str]:
            with CliRunner().isolation(env=env_db) as streams:
                code = main(list(argv))
            return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()

        assert run("init")[0] == 0
        code, _, err = run("target", "add", "cap", "--table", TABLE, "--id-column", "id",
                           "--vector-column", "emb")  # fmt: skip
        assert code == 0, err
        counts = {}
        for path in [*logs.glob("*.json"), *logs.glob("*.log"), gz]:
            code, out, err = run("queries", "capture", str(path), "--target", "cap", "--name",
                                 "x", "--replace", "--format", "json")  # fmt: skip
            assert code == 0, (path, err)
            rep = json.loads(out)
            counts[path.name] = (rep["queries"], rep["searches"], len(rep["shapes"]))
        assert set(counts.values()) == {(12 + 3 + 4, 12 + 5 + 3 + 4, 3)}, counts
    finally:
        server.stop(datadir)
        shutil.rmtree(top, ignore_errors=True)


def _app_recall(kb, docs, tenants, q, ef: int, tenant: str | None) -> float:
    """Recall@K of the application's own statement at ``hnsw.ef_search = ef`` against numpy's
    exact search (within the tenant)."""
    kb.execute(f"SET hnsw.ef_search = {ef}")
    if tenant is None:
        got = kb.execute(
            f"SELECT id FROM {TABLE} ORDER BY emb <=> %s::vector LIMIT {K}", (vtext(q),)
        ).fetchall()
        truth = _exact(docs, q, K)
    else:
        got = kb.execute(
            f"SELECT id FROM {TABLE} WHERE tenant = %s ORDER BY emb <=> %s LIMIT {K}",
            (tenant, vtext(q)),
        ).fetchall()
        truth = _exact(docs, q, K, tenants == tenant)
    return len({g[0] for g in got} & truth) / K


def _one_shot(database):
    """A connection whose statements are never prepared: each search planned with its values
    (the custom plan, which `sweep --captured` measures), not switched to the generic plan after
    psycopg prepares the sixth execution of the same text."""
    return psycopg.connect(database.uri(), autocommit=True, prepare_threshold=None)


def _shape_recalls(kb, app_log, shape: int, ef: int) -> list[float]:
    """Per query of ``shape``, numpy's recall@K of the application's own statement of that
    shape at ``hnsw.ef_search = ef`` (shape 3 within each query's tenant); ``kb``: a
    :func:`_one_shot` connection."""
    docs, tenants = app_log["docs"], app_log["tenants"]
    sent = app_log["sent"][shape]
    which = app_log["tenants_c"] if shape == 3 else [None] * len(sent)
    return [_app_recall(kb, docs, tenants, q, ef, t) for q, t in zip(sent, which, strict=True)]


def test_sweep_on_captured_queries_agrees_with_numpy(database, app_log, captured):
    """`sweep --captured`: each shape measured as the application sent it, its recall equal to
    numpy's on that shape's own statement (shape 3 within each query's tenant), the weighted
    figure the share-weighted numpy figures; a rerun reuses the shapes' sweeps; `--group-by
    tenant`: each tenant's own captured queries, recall within the tenant equal to numpy's."""
    _, run = captured
    argv = ("sweep", "--target", "cap", "--stage", "hnsw", "--captured", "app", "--param",
            "hnsw.ef_search=10", "--name", "cap-shapes", "--format", "json")  # fmt: skip
    code, out, err = run(*argv)
    assert code == 0, err
    res = json.loads(out)
    assert sorted(res["sweeps"].values()) == [f"cap-shapes.s{n}" for n in (1, 2, 3)]
    shapes = {r["shape"]: r for r in res["shapes"]}
    shares = {1: 45 / 105, 2: 30 / 105, 3: 30 / 105}
    with _one_shot(database) as kb:
        want = {n: float(np.mean(_shape_recalls(kb, app_log, n, 10))) for n in (1, 2, 3)}
    for n, r in shapes.items():
        assert (r["queries"], r["k"]) == (len(app_log["sent"][n]), K)
        assert r["share"] == pytest.approx(shares[n])
        assert r["recall"] == pytest.approx(want[n], abs=1e-9), n
    assert min(want.values()) < 1.0
    weighted = sum(want[n] * shares[n] for n in want)
    assert res["weighted_recall"] == pytest.approx(weighted, abs=1e-9)
    code, out, err = run(*argv)  # a rerun: every shape's point reused
    assert code == 0, err
    again = json.loads(out)
    assert again["weighted_recall"] == res["weighted_recall"]
    assert res["measured"] > 0 and again["measured"] == 0 and again["reused"] > 0
    with database.connect() as c:
        assert (
            c.execute(
                "SELECT count(*) FROM pgeval.sweep WHERE name LIKE 'cap-shapes.s%'"
            ).fetchone()[0]
            == 3
        )
    code, out, err = run("sweep", "--target", "cap", "--stage", "hnsw", "--captured", "app",
                         "--param", "hnsw.ef_search=10", "--group-by", "tenant",
                         "--format", "json")  # fmt: skip
    assert code == 0, err
    groups = {g["group"]: g for g in json.loads(out)["groups"]}
    assert set(groups) == set(TENANTS)
    docs, tenants, sent = app_log["docs"], app_log["tenants"], app_log["sent"]
    with _one_shot(database) as kb:
        for t, g in groups.items():
            mine = [q for q, tc in zip(sent[3], app_log["tenants_c"], strict=True) if tc == t]
            assert g["queries"] == len(mine) == 10
            want_t = np.mean([_app_recall(kb, docs, tenants, q, 10, t) for q in mine])
            assert g["recall"] == pytest.approx(want_t, abs=1e-9), t


def test_sweep_find_on_captured_shapes_reaches_the_target_in_every_shape(
    database, app_log, captured, monkeypatch
):
    """`sweep --captured --find`: each shape finds its least value, every shape is measured at
    the largest, and numpy's recall there reaches the target in every shape; where no value up
    to --find-max reaches it, the shapes that cannot are named with their best, in 80 columns
    (the index, m = 4 and ef_construction = 8, tops out far below 1)."""
    _, run = captured
    goal = 0.35
    code, out, err = run("sweep", "--target", "cap", "--stage", "hnsw", "--captured", "app",
                         "--find", "hnsw.ef_search", "--target-recall", str(goal),
                         "--find-max", "400", "--repeat", "1", "--format", "json")  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    assert res["verdict"]["point"] is not None and res["verdict"]["point"] == res["at"]["label"]
    ef = int(res["at"]["settings"]["hnsw.ef_search"])
    assert ef == max(int(f["value"]) for f in res["finds"].values())
    with _one_shot(database) as kb:
        got = {n: float(np.mean(_shape_recalls(kb, app_log, n, ef))) for n in (1, 2, 3)}
    assert all(r >= goal - 1e-9 for r in got.values()), (ef, got)
    shapes = {r["shape"]: r["recall"] for r in res["shapes"]}
    assert shapes == pytest.approx(got, abs=1e-9)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run("sweep", "--target", "cap", "--stage", "hnsw", "--captured", "app",
                         "--find", "hnsw.ef_search", "--target-recall", str(goal),
                         "--find-max", "2", "--repeat", "1")  # fmt: skip
    assert code == 0, err
    assert "reaches recall 0.35 in every shape: shape " in out and "cannot (best " in out, out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_sweep_on_captured_queries_refuses_another_table_and_a_broken_statement(database, captured):
    _, run = captured
    with database.connect(results=False, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS cap_other")
        c.execute(f"CREATE TABLE cap_other (id int PRIMARY KEY, tenant text, emb vector({DIM}))")
        c.execute(f"INSERT INTO cap_other SELECT id, tenant, emb FROM {TABLE} LIMIT 50")
    code, _, err = run("target", "add", "cap_other", "--table", "cap_other", "--id-column",
                       "id", "--vector-column", "emb", "--replace")  # fmt: skip
    assert code == 0, err

    def stored() -> int:
        with database.connect() as c:
            return c.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0]

    before = stored()
    code, out, err = run("sweep", "--target", "cap_other", "--stage", "hnsw", "--captured",
                         "app", "--param", "hnsw.ef_search=10")  # fmt: skip
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "captured set 'app' holds searches of cap_kb.emb" in err
    code, out, err = run("queries", "capture", "--how")
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"ALTER TABLE {TABLE} RENAME COLUMN tenant TO tenant_gone")
    try:
        code, out, err = run("sweep", "--target", "cap", "--stage", "hnsw", "--captured",
                             "app", "--param", "hnsw.ef_search=10")  # fmt: skip
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f"ALTER TABLE {TABLE} RENAME COLUMN tenant_gone TO tenant")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "shape 3" in err and "tenant" in err
    assert stored() == before


def test_advise_on_captured_queries_meets_the_target_on_them(database, app_log, captured):
    """advise --captured on a table whose HNSW index is advise's own design (pgvector's
    defaults): measured in place, its recommendation applied as printed gives the application's
    statement, on the captured queries, exactly the recall printed by numpy's exact search, and
    it reaches the target. Each shape measured as the application sent it at that setting (and
    at a lower one, where a shape misses the target and is named) equals numpy on that shape's
    own statement, and so does whether every shape reaches the target."""
    from evaluator.testset.query_source import QuerySource
    from evaluator.tuning.advise import shapes as advise_shapes
    from evaluator.tuning.advise.plan import AdviseConfig

    _, run = captured
    docs, tenants, sent = app_log["docs"], app_log["tenants"], app_log["sent"]
    every = np.concatenate([sent[1], sent[2], sent[3]])
    hnsw = (
        "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
        "WHERE indrelid = %s::regclass AND pg_get_indexdef(indexrelid) LIKE '%%hnsw%%'"
    )
    with psycopg.connect(database.uri(), autocommit=True) as kb:
        old = kb.execute(hnsw, (TABLE,)).fetchall()
        try:
            for name, _ in old:
                kb.execute(f"DROP INDEX {name}")
            kb.execute(f"CREATE INDEX cap_kb_default ON {TABLE} USING hnsw (emb vector_cosine_ops)")
            # (on 4,000 rows the planner would scan the table rather than this larger index)
            argv = ("advise", "--target", "cap", "--captured", "app", "--designs", "hnsw",
                    "--target-recall", "0.95", "--set", "enable_seqscan=off")  # fmt: skip
            code, out, err = run(*argv, "--format", "json")
            assert code == 0, err
            res = json.loads(out)
            code, text, err = run(*argv)  # a rerun: every figure stored, the shapes too
            assert code == 0, err
            rec = res["recommendation"]
            assert res["queries"]["source"] == "captured" and rec["keep"] == "cap_kb_default"
            ef = int(rec["setting"]["hnsw.ef_search"])
            # (on 4,000 rows the planner would scan the table rather than this larger index:
            # the application's statement is measured through the index advise measured)
            kb.execute("SET enable_seqscan = off")
            got = np.mean([_app_recall(kb, docs, tenants, q, ef, None) for q in every])
            kb.execute("RESET enable_seqscan")
            with _one_shot(database) as one:  # each shape as sent, under the planner's plan
                one.execute("SET enable_seqscan = off")  # (advise's --set)
                want = {n: float(np.mean(_shape_recalls(one, app_log, n, ef))) for n in (1, 2, 3)}
                low = {n: float(np.mean(_shape_recalls(one, app_log, n, 10))) for n in (1, 2, 3)}
            # a setting some shape does not reach the target at: named, with what finds its need
            cfg = AdviseConfig(target="cap", queries=QuerySource("captured", captured="app"),
                               settings={"enable_seqscan": "off"})  # fmt: skip
            lower = {**rec, "setting": {"hnsw.ef_search": 10}}
            lower, note = advise_shapes.check(database, cfg, lower, lambda w: None)
        finally:
            kb.execute("DROP INDEX IF EXISTS cap_kb_default")
            for _, ddl in old:
                kb.execute(ddl)
    assert got == pytest.approx(rec["recall"], abs=1e-9)  # the figure printed is numpy's
    assert got >= 0.95 - 1e-9, (ef, got)
    # the recommendation measured per shape as the application sent it, at its setting
    shapes = rec["shapes"]
    assert shapes["settings"] == {"hnsw.ef_search": str(ef)}
    assert {r["shape"]: r["recall"] for r in shapes["shapes"]} == pytest.approx(want, abs=1e-9)
    shares = {1: 45 / 105, 2: 30 / 105, 3: 30 / 105}
    weighted = sum(want[n] * shares[n] for n in want)
    assert shapes["weighted_recall"] == pytest.approx(weighted, abs=1e-9)
    missing = [n for n in want if want[n] < 0.95 - 1e-9]
    assert shapes["every_shape"] is (not missing) and shapes["missing"] == missing
    said = "captured shapes, as the application sends them: shape 1 "
    assert said in text and ("every shape reaches 0.95" in text) is not missing, text
    sweep = "pgeval sweep --target cap --stage hnsw --captured app --target-recall 0.95 --find"
    assert (sweep in rec["why"]) is bool(missing), rec["why"]
    got_low = {r["shape"]: r["recall"] for r in lower["shapes"]["shapes"]}
    assert got_low == pytest.approx(low, abs=1e-9)
    missing = [n for n in low if low[n] < 0.95 - 1e-9]
    assert missing and lower["shapes"]["missing"] == missing and not lower["shapes"]["every_shape"]
    assert note is not None and f"{sweep} hnsw.ef_search`" in note and sweep in lower["why"]
    assert all(f"shape {n} (" in note for n in missing), note


def test_watch_probes_the_newest_captured_queries(database, app_log, captured, tmp_path):
    """A scheduled job captures the newest log with --append, then watches --captured --window:
    the probe measures only the queries sent within the window of the newest."""
    _, run = captured
    code, _, err = run("queries", "capture", str(app_log["log"]), "--target", "cap", "--name",
                       "series", "--replace")  # fmt: skip
    assert code == 0, err
    time.sleep(2.5)
    log = _log_path(database)
    start = log.stat().st_size
    newer = _queries(6, np.random.default_rng(8))
    _send(_app(database, ROLE), newer, [], [], [])
    _wait_logged(log, start, "the application is done")
    later = tmp_path / "later.log"
    with log.open("rb") as f:
        f.seek(start)
        later.write_bytes(f.read())
    code, out, err = run("queries", "capture", str(later), "--target", "cap", "--name", "series",
                         "--append", "--format", "json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["queries"] == 6
    code, out, err = run("watch", "--target", "cap", "--stage", "hnsw", "--captured", "series",
                         "--window", "2s", "--format", "json")  # fmt: skip
    assert code == 0, err
    (probe,) = json.loads(out)["probes"]  # (the newer searches are all of shape 1)
    assert probe["query_source"] == {
        "kind": "captured", "captured": "series", "window": "2s", "shape": 1
    }  # fmt: skip
    assert probe["queries"] == 6 and probe["group_key"] == {"shape": "1"}
    code, out, err = run("watch", "--target", "cap", "--stage", "hnsw", "--captured", "series",
                         "--format", "json")  # fmt: skip
    assert code == 0, err
    # one probe per shape, each as the application sent it, at the server's ef_search (40)
    got = json.loads(out)
    probes = {int(p["group_key"]["shape"]): p for p in got["probes"]}
    assert sum(p["queries"] for p in probes.values()) == 106
    with _one_shot(database) as kb:
        want = {n: _shape_recalls(kb, app_log, n, 40) for n in (1, 2, 3)}
        docs, tenants = app_log["docs"], app_log["tenants"]
        want[1] += [_app_recall(kb, docs, tenants, q, 40, None) for q in newer]
    for n, p in probes.items():
        assert p["recall"] == pytest.approx(float(np.mean(want[n])), abs=1e-9), n
    sent = {1: 45 + 11, 2: 30, 3: 30}  # (the first five of each batch sent twice)
    weighted = sum(np.mean(want[n]) * sent[n] for n in sent) / sum(sent.values())
    assert got["shapes"]["weighted_recall"] == pytest.approx(weighted, abs=1e-9)
    worst = min(sent, key=lambda n: float(np.mean(want[n])))
    assert got["shapes"]["worst_shape"] == worst
    code, _, err = run("watch", "--target", "cap", "--stage", "hnsw", "--captured", "series",
                       "--window", "soon")  # fmt: skip
    assert code == 1 and err.count("\n") == 1 and "'soon' is not a window" in err


def _probe(kb, target: str, **args) -> list[dict]:
    """pgeval.run_probe(target, 'hnsw', **args): its rows as dicts."""
    named = "".join(f", {k} => %({k})s" for k in args)
    cur = kb.execute(f"SELECT * FROM pgeval.run_probe(%(t)s, 'hnsw'{named})", {"t": target, **args})
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


SHARES = {1: 45 / 105, 2: 30 / 105, 3: 30 / 105}  # of the 105 searches sent


def test_run_probe_in_sql_on_captured_queries(database, app_log, captured):
    """pgeval.run_probe(..., p_captured): one probe per shape, each its own series, each shape's
    recall numpy's on the application's own statement at the probe's setting (shape 3 within
    its tenant), the weighted figure the shares' mean of numpy's, the worst shape named."""
    docs, tenants, sent = app_log["docs"], app_log["tenants"], app_log["sent"]
    with psycopg.connect(database.uri(), autocommit=True, prepare_threshold=None) as kb:
        rows = _probe(kb, "cap", p_settings='{"hnsw.ef_search": 10}', p_captured="app")
        # as the probe applies the setting; each search one-shot (its custom plan, as measured)
        kb.execute("SET enable_seqscan = off")
        want = {
            s: float(np.mean([_app_recall(kb, docs, tenants, q, 10,
                                          app_log["tenants_c"][i] if s == 3 else None)
                              for i, q in enumerate(sent[s])]))
            for s in (1, 2, 3)
        }  # fmt: skip
        recorded = kb.execute(
            "SELECT group_key, query_source, via, queries, settings, index_name FROM pgeval.probe "
            "WHERE probe_id = ANY (%s) ORDER BY probe_id",
            ([r["probe_id"] for r in rows],),
        ).fetchall()
        hnsw = kb.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%hnsw%%'",
            (TABLE,),
        ).fetchall()
    assert [r["shape"] for r in rows] == [1, 2, 3]
    assert min(want.values()) < 1.0  # approximate at ef_search 10
    weighted = sum(SHARES[s] * want[s] for s in want)
    worst = min(want, key=lambda s: (want[s], str(s)))
    for r in rows:
        assert r["recall"] == pytest.approx(want[r["shape"]], abs=1e-9), r
        assert r["share"] == pytest.approx(SHARES[r["shape"]], abs=1e-12)
        assert r["weighted_recall"] == pytest.approx(weighted, abs=1e-9)
        assert (r["worst_shape"], r["worst_recall"]) == (worst, pytest.approx(want[worst]))
    assert [g for g, *_ in recorded] == [{"shape": "1"}, {"shape": "2"}, {"shape": "3"}]
    assert recorded[2][1:] == (
        {"kind": "captured", "captured": "app", "window": None, "shape": 3},
        "sql",
        30,
        {"hnsw.ef_search": "10"},
        hnsw[0][0],
    )


def test_run_probe_in_sql_window_and_refusals(database, app_log, captured):
    """p_window: only the queries sent within it of the set's newest (here all but 5 of shape 1
    and 3 of shape 3 made a day older), each recall numpy's on those; refusals in one line,
    nothing recorded."""
    _, run = captured
    code, _, err = run("queries", "capture", str(app_log["log"]), "--target", "cap",
                       "--name", "aged", "--replace")  # fmt: skip
    assert code == 0, err
    docs, tenants = app_log["docs"], app_log["tenants"]
    with psycopg.connect(database.uri(), autocommit=True, prepare_threshold=None) as kb:
        newest = kb.execute(
            "SELECT query_id, shape, vector, params[1] FROM pgeval.captured_queries('aged') "
            "WHERE shape IN (1, 3)"
        ).fetchall()
        keep = [q for q in newest if q[1] == 1][:5] + [q for q in newest if q[1] == 3][:3]
        kb.execute(
            "UPDATE pgeval.captured_query q SET last_seen = last_seen - interval '1 day' "
            "FROM pgeval.captured_set c WHERE c.set_id = q.set_id AND c.name = 'aged' "
            "AND NOT q.query_id = ANY (%s)",
            ([q[0] for q in keep],),
        )
        rows = _probe(
            kb, "cap", p_settings='{"hnsw.ef_search": 10}', p_captured="aged", p_window="1 hour"
        )
        kb.execute("SET enable_seqscan = off")
        want = [
            np.mean([_app_recall(kb, docs, tenants, np.asarray(json.loads(v), dtype=np.float32),
                                 10, p if s == 3 else None)
                     for _, s, v, p in part])
            for part in (keep[:5], keep[5:])
        ]  # fmt: skip
        n = kb.execute(
            "SELECT array_agg(queries ORDER BY probe_id) FROM pgeval.probe "
            "WHERE probe_id = ANY (%s)",
            ([r["probe_id"] for r in rows],),
        ).fetchone()[0]
        assert [(r["shape"], r["share"]) for r in rows] == [(1, SHARES[1]), (3, SHARES[3])]
        assert n == [5, 3]
        for r, w in zip(rows, want, strict=True):
            assert r["recall"] == pytest.approx(float(w), abs=1e-9), r
        total = SHARES[1] * want[0] + SHARES[3] * want[1]
        assert rows[0]["weighted_recall"] == pytest.approx(total / (SHARES[1] + SHARES[3]))

        code, _, err = run("target", "add", "cap-other", "--table", TABLE, "--id-column", "id",
                           "--vector-column", "emb", "--replace")  # fmt: skip
        assert code == 0, err
        before = kb.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0]
        for target, args, says in [
            ("cap", {"p_captured": "nope"}, "no captured set 'nope'"),
            ("cap-other", {"p_captured": "app"}, "holds searches of target 'cap', not 'cap-other'"),
            ("cap", {"p_captured": "app", "p_window": "-1 hour"}, "p_window must be a positive"),
            ("cap", {"p_window": "1 hour"}, "p_window goes with p_captured"),
            ("cap", {"p_captured": "aged", "p_window": "1 hour"}, "'aged' has no query sent"),
        ]:
            if "aged" in args.values():  # a set left with no query
                kb.execute(
                    "DELETE FROM pgeval.captured_query q USING pgeval.captured_set c "
                    "WHERE c.set_id = q.set_id AND c.name = 'aged'"
                )
            with pytest.raises(psycopg.Error) as exc:
                _probe(kb, target, **args)
            msg = exc.value.diag.message_primary or ""
            assert says in msg and "\n" not in msg, msg
        assert kb.execute("SELECT count(*) FROM pgeval.probe").fetchone()[0] == before
