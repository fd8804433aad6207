"""`pgeval advise` (issue 25) on a clustered table of 3,000 rows: one stored sweep per design x
build on a scratch copy; the recommendation's DDL and settings run as printed on the real server
and the application's statement, run by hand, then has the recall pgeval measures on that index
(the rebuild's recall against advise's is bounded, see REBUILD); a budget
that excludes every design says which budget binds; a rerun measures nothing; Ctrl-C leaves no
scratch schema and the rerun continues; no scratch schema is left after any of it."""

from __future__ import annotations

import html
import json
from contextlib import contextmanager

import clustered_kb
import numpy as np
import pytest
from test_sweep_build import scratch_schemas

from evaluator.api import Pgeval
from evaluator.kinds import registry
from evaluator.tuning.advise import margin

pytestmark = pytest.mark.slow

DIM, N, NQ, K = 32, 3000, 40, 10
TABLE, TARGET = "advise_kb", "advise"
SMALL = ["enable_seqscan=off"]  # a 3,000-row table: the planner would rather scan it


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    _, queries, path = clustered_kb.build(
        database,
        tmp_path_factory.mktemp("advise"),
        TABLE,
        dim=DIM,
        n=N,
        nq=NQ,
        seed=7,
        spread=0.6,
        indexes=[],
    )
    with database.connect(results=False, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vectorscale CASCADE")
    pg = Pgeval(database)
    pg.add_target(TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield pg, path, queries
    clustered_kb.drop(database, TABLE)


@pytest.fixture(scope="module")
def advised(kb):
    pg, path, _ = kb
    return pg.advise(TARGET, queries_file=path, target_recall=0.95, settings=SMALL)


def test_every_design_measured_and_json_shape(advised, conn):
    d = advised.as_dict()
    json.dumps(d)  # JSON as printed
    # the default designs (registry.advise_kinds), all built here
    assert [r["design"] for r in d["designs"]] == list(registry.advise_kinds())
    for r in d["designs"]:
        for key in ("design", "build", "setting", "recall", "p50_ms", "p95_ms", "qps"):
            assert key in r, key
        assert r["index_bytes"] > 8192 and r["build_ms"] > 0 and r["rows"] == K
        assert r["fits_shared_buffers"] is True and r["maintenance_work_mem"].endswith("MB")
        assert r["reached"] == (r["recall"] >= 0.95 - 1e-12)
        assert set(r["setting"]) >= {registry.KINDS[r["design"]].find_setting(r["build"])}
        assert r["sweep"] and r["point"]
        # the recall's 95 % interval over the queries, at the design's point
        assert r["recall_queries"] == NQ and 0 <= r["recall_margin"] < 0.2
    # DiskANN's default (SBQ) layout: the re-ranked candidates bound its recall, not the list
    disk = next(r for r in d["designs"] if r["design"] == "diskann")
    assert list(disk["setting"]) == ["diskann.query_rescore"]
    bq = next(r for r in d["designs"] if r["design"] == "hnsw-bq")
    assert bq["setting"]["hnsw.iterative_scan"] == "strict_order"
    rec = d["recommendation"]
    assert rec is not None and d["unmet"] is None
    reached = [r for r in d["designs"] if r["reached"]]
    chosen = next(r for r in reached if r["design"] == rec["design"])
    # the lowest p95, or within its noise (the spread, or p95 intervals that overlap) the
    # smallest index
    fastest = min(reached, key=lambda r: r["p95_ms"])
    overlap = max(fastest["p95_low"], chosen["p95_low"]) <= min(
        fastest["p95_high"], chosen["p95_high"]
    )
    assert overlap or chosen["p95_ms"] - fastest["p95_ms"] <= max(
        fastest["p95_sd"] or 0, chosen["p95_sd"] or 0
    )
    for r in reached:
        assert r["p95_low"] <= r["p95_ms"] <= r["p95_high"]
        # the finalists' found setting measured in three rounds (--final-rounds): its p95 has a
        # spread over them, beside its interval
        rounds = conn.execute(
            "SELECT count(*) FROM pgeval.sweep_point WHERE sweep_id = %s AND point = %s",
            (r["at"]["sweep_id"], r["at"]["point"]),
        ).fetchone()[0]
        assert rounds == 3 and r["p95_sd"] is not None, r["design"]
    if chosen is not fastest:
        assert chosen["index_bytes"] <= fastest["index_bytes"]
    assert rec["ddl"].startswith("CREATE INDEX CONCURRENTLY ") and f'"{TABLE}"' in rec["ddl"]
    assert all(s.startswith("ALTER DATABASE ") for s in rec["settings_sql"])
    assert rec["design"] in rec["why"] and "runner-up" in rec["why"]
    assert f"±{rec['recall_margin']:.4f} over {NQ} queries" in rec["why"]
    # the setting found, with its 95 % interval over resamples of the queries
    iv, value = rec["setting_interval"], chosen["setting"][next(iter(chosen["setting"]))]
    assert iv["low"] <= value and (iv["high"] is None or value <= iv["high"])
    assert (
        f"95 % interval over {iv['resamples']} resamples of the queries: {iv['low']}–" in rec["why"]
    )
    # wider than 0.01 over 40 queries unless nearly every query is perfect: said, with the
    # queries that would narrow it
    wide = [w for w in d["warnings"] if "95 % interval over" in w]
    assert bool(wide) == (rec["recall_margin"] > 0.01), d["warnings"]
    if wide:
        n = margin.queries_for(rec["recall_margin"], NQ)
        assert n > NQ and f"about {n} queries narrow it to ±0.01" in wide[0]
    assert scratch_schemas(conn) == []


def test_rerun_measures_nothing(kb, advised, conn):
    pg, path, _ = kb
    again = pg.advise(TARGET, queries_file=path, target_recall=0.95, settings=SMALL)
    assert [r["measured"] for r in again.designs] == [0] * len(again.designs)
    assert [(r["design"], r["setting"], r["recall"]) for r in again.designs] == [
        (r["design"], r["setting"], r["recall"]) for r in advised.designs
    ]
    assert scratch_schemas(conn) == []


def _by_hand(database, rec: dict, queries) -> tuple[float, list[float]]:
    """Index recall@K of the printed statement, run as the application runs it after the printed
    DDL and settings: rows within the K-th exact distance (1e-6 relative), as docs/METRICS.md."""
    per_query = []
    name = rec["ddl"].split()[3].strip('"')
    with database.connect(results=False) as c:
        for q in queries:
            v = clustered_kb.vtext(q)
            # every setting is LOCAL: a rollback ends a plain SET made in the transaction too
            # (the exact scan of the first query once ran with seqscan and indexscan both off,
            # through the index, and its K-th distance was an ANN one)
            c.execute("SET LOCAL enable_indexscan = off")
            c.execute("SET LOCAL enable_seqscan = on")
            exact = c.execute(
                f"SELECT e <=> %s::vector FROM {TABLE} ORDER BY 1 LIMIT {K}", (v,)
            ).fetchall()
            c.rollback()
            d_k = exact[-1][0]
            c.execute("SET LOCAL enable_seqscan = off")  # as SMALL, for the printed statement
            stmt = rec["query_sql"].replace("$1", "%s")
            n = stmt.count("%s")
            plan = "\n".join(r[0] for r in c.execute("EXPLAIN " + stmt, (v,) * n))
            assert name in plan, plan
            ids = [r[0] for r in c.execute(stmt, (v,) * n).fetchall()]
            full = [
                r[0]
                for r in c.execute(
                    f"SELECT e <=> %s::vector FROM {TABLE} WHERE id = ANY(%s)", (v, ids)
                ).fetchall()
            ]
            c.rollback()
            per_query.append(sum(1 for d in full if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / K)
    return sum(per_query) / len(queries), per_query


# The index built on the table is another build than the one advise measured on its scratch copy:
# HNSW draws levels at random, IVFFlat's k-means samples rows at random. Near the target the
# recall of a rebuild differs (measured here: ivfflat 0.80 against 0.9125 reported, hnsw-bq 0.885
# against 0.90; bench/advise.py: hnsw 0.938 against 0.960 at 20,000 rows), which the
# recommendation says. So the statements are checked as printed on the index they build: the
# settings are in force in a new session, the plan uses the new index, and pgeval's own
# measurement of that index at the printed setting equals the printed statement's recall by hand
# (the same lists: to 1e-9); the rebuild's recall against advise's is only bounded (REBUILD).
REBUILD = 0.2


@contextmanager
def applied(database, rec: dict):
    """The recommendation's DDL and settings SQL run as printed; afterwards (also on failure) the
    index dropped and the settings reset."""
    name = rec["ddl"].split()[3].strip('"')
    with database.connect(results=False, autocommit=True) as c:
        db = c.execute("SELECT current_database()").fetchone()[0]
    try:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(rec["ddl"])  # as printed
            for s in rec["settings_sql"]:
                c.execute(s)
        yield
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f'DROP INDEX IF EXISTS "{name}"')
            for s in rec["settings_sql"]:
                setting = s.split(" SET ", 1)[1].split(" = ")[0]
                c.execute(f'ALTER DATABASE "{db}" RESET {setting}')


def _apply_and_check(database, pg, path, rec: dict, queries) -> None:
    with applied(database, rec):
        server = {n: str(v) for n, v in rec["setting"].items() if n != "bq.candidates"}
        with database.connect(results=False, autocommit=True) as c:  # a new session
            for n, v in server.items():
                assert c.execute("SELECT current_setting(%s)", (n,)).fetchone()[0] == v, n
        by_hand, per_query = _by_hand(database, rec, queries)
        find, value = next(iter(rec["setting"].items()))  # the setting advise found
        measured = pg.sweep(
            target=TARGET,
            stage=rec["design"],
            queries_file=path,
            params={find: [value]},
            settings=SMALL,
            k=K,
            depth=K,
            repeat=2,  # the same queries twice: the margin is still over NQ queries
            fresh=True,
        )
        (point,) = measured.points
        # the same index, queries and setting: the same lists, so the same recall
        assert by_hand == pytest.approx(point["index_recall"], abs=1e-9)
        # its 95 % margin (SQL) is 1.96 s / sqrt(n) of the per-query recalls by hand
        with database.connect() as r:
            n, margin = r.execute(
                "SELECT queries, margin95 FROM pgeval.sweep_point_recall_margin(%s, %s, %s)",
                (measured.sweep_id, point["point"], K),
            ).fetchone()
        assert n == len(queries)
        assert margin == pytest.approx(1.96 * np.std(per_query, ddof=1) / np.sqrt(n), abs=1e-12)
        assert by_hand == pytest.approx(rec["recall"], abs=REBUILD)


def test_recommendation_applied_as_printed_reaches_its_recall(kb, advised, database):
    pg, path, queries = kb
    _apply_and_check(database, pg, path, advised.recommendation, queries)


@pytest.mark.parametrize("design", ["hnsw-bq", "hnsw-halfvec", "ivfflat"])
def test_each_design_applied_as_printed(kb, advised, database, design):
    pg, path, queries = kb
    res = pg.advise(TARGET, queries_file=path, target_recall=0.9, settings=SMALL, designs=design)
    rec = res.recommendation
    assert rec["design"] == design
    assert ("k-means" in rec["why"]) == (design == "ivfflat")
    _apply_and_check(database, pg, path, rec, queries)


def test_low_end_shows_a_design_at_its_setting_intervals_upper_end(kb, advised, pgeval, conn):
    pg, path, _ = kb
    # hnsw-bq: its candidates run in steps of one, and each query's recall varies there (an
    # HNSW ef_search under K cuts every list to the same length: no spread)
    kw = dict(queries_file=path, target_recall=0.9, settings=SMALL, designs="hnsw-bq")
    plain = pg.advise(TARGET, **kw).designs[0]
    iv, setting = plain["setting_interval"], "bq.candidates"
    # without --low-end: the value found, within its interval
    assert plain["reached"] and iv["low"] <= plain["setting"][setting] <= iv["high"]
    assert "low_end" not in plain
    res = pg.advise(TARGET, **kw, low_end=True)
    row = res.designs[0]
    assert res.as_dict()["low_end"] is True and row["reached"]
    # with it: the interval's upper end, a value the find measured (nothing measured again)
    assert row["setting"][setting] == iv["high"] == res.recommendation["setting"][setting]
    assert row["low_end"] == {"value": iv["high"], "found": plain["setting"][setting]}
    assert row["measured"] == 0 and row["setting_interval"] == iv
    # its figures are that point's, as SQL summarises the sweep
    point = conn.execute(
        "SELECT s.index_recall, s.p95_ms, s.p50_ms, s.qps, s.rows_mean, s.settings->>%s "
        "FROM pgeval.sweep w CROSS JOIN LATERAL pgeval.sweep_summary(w.sweep_id) s "
        "WHERE w.name = %s AND s.point = %s",
        (setting, row["sweep"], row["at"]["point"]),
    ).fetchone()
    assert point == (
        row["recall"], row["p95_ms"], row["p50_ms"], row["qps"], row["rows"], str(iv["high"])
    )  # fmt: skip
    assert row["recall"] >= 0.9 - 1e-12
    assert "at the upper end of its setting's 95 % interval" in res.recommendation["why"]
    assert res.recommendation["low_end"] == row["low_end"]
    code, out, err = pgeval(
        "advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0],
        "--designs", "hnsw-bq", "--target-recall", "0.9", "--low-end", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    again = json.loads(out)
    assert again["low_end"] is True  # stored: the same setting, nothing measured
    assert again["designs"][0]["setting"] == row["setting"]
    assert again["designs"][0]["measured"] == 0
    assert scratch_schemas(conn) == []


def test_low_end_above_every_value_measured_is_not_reached():
    from dataclasses import replace

    from evaluator.tuning.advise import measure
    from evaluator.tuning.advise.outcome import Figures, Groups, Measurement, Outcome
    from evaluator.tuning.advise.plan import Design

    design = Design(kind="hnsw-bq", build={}, find="bq.candidates", fixed={})
    measured = Measurement(
        design="hnsw-bq",
        build={},
        setting={"bq.candidates": 12},
        figures=Figures(),
        reached=True,
        sweep=None,
        point=None,
        at=None,
        index=None,
        counts=(0, 0, 0),
        find_path=None,
        setting_interval={"level": 0.95, "low": 11, "high": None, "resamples": 500},
        points=[],
    )
    row = measure.low_end(Outcome(measured), None, design, 0.9)  # type: ignore[arg-type]
    assert row["reached"] is False
    assert row["low_end"] == {"value": None, "found": 12, "why": measure.UNMEASURED}
    assert "raise --find-max" in measure.UNMEASURED
    # grouped: shown at the value every group reaches, said so
    groups = Groups({}, None, [], [], [], {}, [], {})
    grouped = Outcome(replace(measured, groups=groups))
    grouped = measure.low_end(grouped, None, design, 0.9)  # type: ignore[arg-type]
    assert grouped["reached"] is True and grouped["setting"] == {"bq.candidates": 12}
    assert grouped["low_end"] == {"value": None, "found": 12, "why": measure.GROUPED}


def test_a_setting_that_caps_the_rows_is_found_from_the_limit_up(kb, advised):
    # hnsw.ef_search 9 returns 9 rows: recall 0.9 exactly, every query (the LIMIT is 10); the
    # find starts at the LIMIT, so a target of 0.9 is met with every row the application asks
    pg, path, _ = kb
    res = pg.advise(TARGET, queries_file=path, target_recall=0.9, settings=SMALL, designs="hnsw")
    row = res.designs[0]
    assert row["reached"] and row["setting"]["hnsw.ef_search"] >= K and row["rows"] == K
    assert min(v for v, _ in row["find_path"]) == K


def test_a_find_stopped_at_the_server_maximum_does_not_say_raise_find_max(kb, database):
    from evaluator.tuning.advise import recommend

    rows = [
        {"setting": {"diskann.query_rescore": 1000}},
        {"setting": {"hnsw.ef_search": 400}},
        {"setting": {"bq.candidates": 5000, "hnsw.iterative_scan": "strict_order"}},
    ]
    with database.connect(results=False, autocommit=True) as c:
        ceilings = recommend.ceilings(c, rows)
    # the servers' own maxima (pg_settings); pgeval's bq.candidates has none
    assert ceilings == {"diskann.query_rescore": 1000.0, "hnsw.ef_search": 1000.0}
    at_max, below, own = (recommend._higher(r, ceilings) for r in rows)
    assert at_max.startswith("diskann.query_rescore is at the server's maximum (1000)")
    assert "--find-max" not in at_max
    assert below == own == "raise --find-max or build the index denser (--build)"


def test_budget_excluding_every_design_says_which_binds(kb, advised, pgeval, conn):
    _, path, _ = kb
    args = ["advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0]]
    code, out, err = pgeval(*args, "--max-p95-ms", "0.0001", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["recommendation"] is None
    assert d["unmet"]["binding"] == ["--max-p95-ms"]
    closest = d["unmet"]["closest"]
    # (reached as the find and pgeval.sweeps_recommendation judge it: within 1e-12, a mean of
    # per-query ratios being a float sum)
    assert closest["needs"]["--max-p95-ms"] > 0.0001 and closest["recall"] >= 0.95 - 1e-12
    assert "--max-p95-ms 0.0001 binds" in d["unmet"]["why"]
    assert [r["measured"] for r in d["designs"]] == [0] * len(d["designs"])  # stored
    # the table says the same in words
    code, out, err = pgeval(*args, "--max-p95-ms", "0.0001", "--max-index-mb", "1000")
    assert code == 0, err
    assert "no recommendation: no design meets recall@10 >= 0.95 within the budgets" in out
    assert "--max-p95-ms 0.0001 binds" in out and "--max-index-mb" not in out.split("binds")[1]
    assert "advise: design 1 of 5: hnsw m=16" in err
    assert scratch_schemas(conn) == []


def test_table_output_applies_as_printed(kb, advised, pgeval, tmp_path):
    _, path, _ = kb
    png, page = tmp_path / "advise.png", tmp_path / "advise.html"
    code, out, err = pgeval(
        "advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0],
        "--plot", str(png), "--report", str(page),
    )  # fmt: skip
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and len(png.read_bytes()) > 10_000
    doc = page.read_text(encoding="utf-8")
    assert 'id="plot-advise"' in doc and "<svg" in doc and "<title>" in doc  # hover
    # (the same advise again, which measures nothing: the recommendation of the points stored
    # now, which the tests before may have added to: a point beating another beyond noise wins)
    again = kb[0].advise(TARGET, queries_file=path, target_recall=0.95, settings=SMALL)
    assert html.escape(again.recommendation["ddl"]) + ";" in doc
    assert all(r["sweep"] in doc for r in again.designs)  # the evidence of every figure
    rec = again.recommendation
    assert f"  {rec['ddl']};" in out.splitlines()
    for s in rec["settings_sql"]:
        assert f"  {s};" in out.splitlines()
    assert "recommended: " + rec["why"] in out


class Stop(Exception):
    pass


def test_ctrl_c_during_a_find_leaves_no_scratch_and_resumes(kb, database, conn):
    pg, path, _ = kb
    seen = []

    def stop(message):
        seen.append(scratch_schemas(conn))  # the copy exists while a design is measured
        raise KeyboardInterrupt()

    kw = dict(queries_file=path, settings=SMALL, designs="hnsw", build=["hnsw:m=12"])
    from evaluator.testset.query_source import from_options
    from evaluator.tuning.advise import AdviseConfig, run_advise  # on_find: the library's hook

    cfg = AdviseConfig(
        target=TARGET,
        queries=from_options(
            testset=None, sample=None, seed=None, queries_sql=None, queries_file=str(path)
        ),
        designs=("hnsw",),
        build=("hnsw:m=12",),
        settings={"enable_seqscan": "off"},
    )
    with pytest.raises(KeyboardInterrupt):
        run_advise(database, cfg, on_find=lambda design, point, recall: stop(point))
    assert seen and seen[0] != [] and scratch_schemas(conn) == []
    res = pg.advise(TARGET, **kw)
    row = res.designs[0]
    assert row["kept"] == 1 and row["measured"] >= 1 and row["reached"]
    assert scratch_schemas(conn) == []


def _helpers(conn) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM pgeval.target WHERE name LIKE %s ORDER BY 1", (f"{TARGET}~%",)
        ).fetchall()
    ]


def test_a_failed_advise_leaves_no_helper_target(kb, database, conn, pgeval):
    """An advise that fails while it screens on a sample (issue 50): the sample's scratch schema
    is dropped and so is the helper target over it (``advise~sample1200``); `target list` never
    lists a helper as the user's, also while it exists."""
    from evaluator.testset.query_source import from_options
    from evaluator.tuning.advise import AdviseConfig, run_advise

    _, path, _ = kb
    seen = []

    def fail(point):
        code, out, err = pgeval("target", "list", "--format", "json")
        assert code == 0, err
        seen.append((_helpers(conn), [t["target"] for t in json.loads(out)]))
        raise RuntimeError("the server went away")

    cfg = AdviseConfig(
        target=TARGET,
        queries=from_options(
            testset=None, sample=None, seed=None, queries_sql=None, queries_file=str(path)
        ),
        designs=("hnsw",),
        build=("hnsw:m=10",),
        sample_rows=1200,
        settings={"enable_seqscan": "off"},
    )
    with pytest.raises(RuntimeError, match="went away"):
        run_advise(database, cfg, on_find=lambda design, point, recall: fail(point))
    assert seen, "no value was measured on the sample"
    stored, listed = seen[0]
    assert stored == [f"{TARGET}~sample1200"]  # (what the sample's sweeps search)
    assert TARGET in listed and not [t for t in listed if "~" in t], listed
    assert _helpers(conn) == [] and scratch_schemas(conn) == []


def test_sweep_find_under_builds(kb, pgeval, conn):
    """What advise composes: `sweep --build ... --find ...`, one find per build on one scratch
    copy; a rerun builds nothing, and a find under another --target-recall keeps every value
    already tried under its point."""
    _, path, _ = kb
    args = ["sweep", "--target", TARGET, "--queries-file", str(path), "--stage", "hnsw"]
    args += ["--build", "m=6,16", "--find", "hnsw.ef_search", "--set", SMALL[0], "--repeat", "1"]
    code, out, err = pgeval(*args, "--format", "json", "--target-recall", "0.95")
    assert code == 0, err
    d = json.loads(out)
    assert [f["build"] for f in d["finds"]] == [{"m": "6"}, {"m": "16"}]
    for f in d["finds"]:
        assert f["reached"] and f["recall"] >= 0.95 - 1e-12
        points = [p for p in d["points"] if p["build"] == f["build"]]
        assert len(points) == len(f["path"]) and all(p["build_ms"] > 0 for p in points)
    assert scratch_schemas(conn) == []
    code, out, err = pgeval(*args, "--format", "json", "--target-recall", "0.95")
    assert code == 0, err
    assert json.loads(out)["measured"] == 0
    code, out, err = pgeval(*args, "--format", "json", "--target-recall", "0.99")
    assert code == 0, err
    again = json.loads(out)
    assert again["kept"] >= 2 and again["measured"] >= 1  # values tried before are kept
    before = {p["label"]: p["point"] for p in d["points"]}
    assert all(before.get(p["label"], p["point"]) == p["point"] for p in again["points"])
    assert scratch_schemas(conn) == []


def test_sample_rows_screens_then_confirms_on_the_table(kb, pgeval, conn):
    """--sample-rows: every design screened on 1,000 of the 3,000 rows (its own stored target,
    ground truth on those rows); no index in place, so the best screened is built in full (one at
    most): its row is the full table's stored sweep point; every other design is dropped, saying
    why, its figures labelled the sample's, and the output says so."""
    _, path, _ = kb
    args = ["advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0]]
    args += ["--designs", "hnsw,hnsw-halfvec,ivfflat", "--target-recall", "0.9"]
    code, out, err = pgeval(*args, "--sample-rows", "1000", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["screened_on"] == 1000 and d["confirmed_on"] == "full"
    assert d["screen"] == {
        "target": f"{TARGET}~sample1000",
        "rows": 1000,
        "table_rows": N,
        "held_out": 0,  # (queries from a file: no row of the table to hold out)
        "samples": 1,
    }
    confirmed = [r for r in d["designs"] if r["measured_on"] == "table"]
    screened = [r for r in d["designs"] if r["measured_on"] == "sample"]
    assert len(confirmed) == 1 and len(confirmed) + len(screened) == 3
    assert d["anchor"] is None and d["full_build"]["design"] == d["confirmed"][0]
    # every design not built in full is dropped, and why; its figures are the sample's
    assert sorted(x["design"] for x in d["dropped"]) == sorted(
        f"{r['design']} {','.join(f'{k}={v}' for k, v in r['build'].items())}" for r in screened
    )
    for r in screened:
        assert r["dropped"] and r["on_table"] == "measure it after building"
        assert r["measured_where"].startswith("scratch copy of 1,000 rows (a sample")
    assert confirmed[0]["gap"].startswith("on 1,000 rows ")
    assert set(d["spent"]) == {"ground_truth", "copies", "builds", "measuring", "total"}
    assert d["spent"]["builds"] > 0 and d["stored"] is False
    assert d["confirmed"] == [
        f"{r['design']} {','.join(f'{k}={v}' for k, v in r['build'].items())}" for r in confirmed
    ]
    sweep_of = dict(conn.execute("SELECT name, target FROM pgeval.sweep").fetchall())
    for r in confirmed:
        # the confirmed figures are the full table's: its sweep names the table's target, its
        # point's run saw 3,000 rows, and the row's recall and p95 are that stored point's
        assert sweep_of[r["sweep"]] == TARGET
        assert sweep_of[r["screened"]["sweep"]] == f"{TARGET}~sample1000"
        point = conn.execute(
            "SELECT s.index_recall, s.p95_ms, r.fingerprint->'data'->>'rows' "
            "FROM pgeval.sweep w CROSS JOIN LATERAL pgeval.sweep_summary(w.sweep_id) s "
            "JOIN pgeval.sweep_point sp ON sp.sweep_id = w.sweep_id AND sp.point = s.point "
            "JOIN pgeval.run r ON r.run_id = sp.run_id WHERE w.name = %s AND s.label = %s",
            (r["sweep"], r["point"]),
        ).fetchone()
        assert point == (r["recall"], r["p95_ms"], str(N))
    for r in screened:
        assert sweep_of[r["sweep"]] == f"{TARGET}~sample1000"
    rec = d["recommendation"]
    assert rec is not None and rec["sweep"] in {r["sweep"] for r in confirmed}
    assert scratch_schemas(conn) == []
    # --wide: at 80 columns a text column may be left out (and named under the table) when the
    # row's figures are wide, which varies with the builds' numbers
    code, out, err = pgeval(*args, "--sample-rows", "1000", "--wide")
    assert code == 0, err
    assert f"screened on a sample of 1,000 of {N:,} rows (target {TARGET}~sample1000)" in out
    assert "built in full: " + ", ".join(d["confirmed"]) in out
    assert "not built in full" in out and all(x["why"] in out for x in d["dropped"])
    # the confirmed design was built on a held-out copy of every row: "copy 3,000"
    assert "measured_on" in out and " sample 1,000" in out and f" copy {N:,}" in out
    assert "stored: nothing built or measured" in out  # (the first run stored every point)
    assert scratch_schemas(conn) == [] and _helpers(conn) == []
    # a rerun draws the same sample: the screening and the confirmation are stored
    code, out, err = pgeval(*args, "--sample-rows", "1000", "--format", "json")
    assert code == 0, err
    again = json.loads(out)
    assert [r["measured"] for r in again["designs"]] == [0, 0, 0]
    assert again["confirmed"] == d["confirmed"] and again["stored"] is True


@pytest.mark.parametrize("role", ["advise_app", "App Role"])
def test_role_settings_run_as_printed(kb, advised, database, conn, role):
    """--role: the settings as ALTER ROLE "role" IN DATABASE "db" SET ..., identifier-quoted;
    run as printed, they are that role's settings in this database (and not the database's)."""
    pg, path, _ = kb
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f'DROP ROLE IF EXISTS "{role}"')
        c.execute(f'CREATE ROLE "{role}"')
    try:
        res = pg.advise(TARGET, queries_file=path, target_recall=0.95, settings=SMALL, role=role)
        rec = res.recommendation
        db = conn.execute("SELECT current_database()").fetchone()[0]
        assert rec["settings_sql"] and all(
            s.startswith(f'ALTER ROLE "{role}" IN DATABASE "{db}" SET ')
            for s in rec["settings_sql"]
        )
        with database.connect(results=False, autocommit=True) as c:
            for s in rec["settings_sql"]:
                c.execute(s)  # as printed
            config = c.execute(
                "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
                "JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = %s AND d.datname = %s",
                (role, db),
            ).fetchone()[0]
            server = {n: str(v) for n, v in rec["setting"].items() if n != "bq.candidates"}
            assert sorted(config) == sorted(f"{n}={v}" for n, v in server.items())
            assert (
                c.execute(
                    "SELECT count(*) FROM pg_db_role_setting WHERE setrole = 0 AND setdatabase = "
                    "(SELECT oid FROM pg_database WHERE datname = %s)",
                    (db,),
                ).fetchone()[0]
                == 0
            )
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f'DROP ROLE IF EXISTS "{role}"')  # its settings go with it
