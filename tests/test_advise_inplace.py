"""The index you have is a candidate, measured in place (issue 36, item 5): a design whose build is
an index the target's table has (method, operator class, column or cast expression, options with
their defaults, valid, not partial) is measured on the table through that index, not rebuilt on a
scratch copy; recommending it prints no CREATE INDEX; a new index's DDL names the indexes it
would supersede, its rollback and when to drop the old one (docs/advise.md, "The index in
place")."""

from __future__ import annotations

import html
import json

import clustered_kb
import pytest

from evaluator.api import Pgeval
from evaluator.targets import targets
from evaluator.tuning.advise import inplace
from evaluator.tuning.advise.plan import Design

DIM, N, NQ = 32, 3000, 40
SMALL = ["enable_seqscan=off"]  # a 3,000-row table: the planner would rather scan it


def _plan() -> list[Design]:
    return [
        Design("hnsw", {"m": "16"}, "hnsw.ef_search", {}),
        Design("hnsw", {"m": "8"}, "hnsw.ef_search", {}),
        Design("hnsw-halfvec", {"m": "16"}, "hnsw.ef_search", {}),
        Design("hnsw-bq", {"m": "16"}, "bq.candidates", {}),
        Design("ivfflat", {"lists": "100"}, "ivfflat.probes", {}),
        Design("ivfflat-halfvec", {"lists": "100"}, "ivfflat.probes", {}),
    ]


@pytest.fixture
def small_table(database, tmp_path):
    table = "inplace_match"
    clustered_kb.build(
        database, tmp_path, table, dim=8, n=200, nq=2, seed=3, spread=0.6, indexes=[]
    )
    pg = Pgeval(database)
    pg.add_target("inplace_match", table=table, id_column="id", vector_column="e", replace=True)
    yield database, table
    clustered_kb.drop(database, table)


def _matched(database) -> dict[str, str | None]:
    with database.connect() as conn:
        target = targets.load(conn, "inplace_match")
    with database.connect(results=False, autocommit=True) as kb:
        plan = inplace.match(kb, target, _plan())
    return {d.label: (d.in_place or {}).get("name") for d in plan}


def test_only_an_index_identical_to_a_build_matches(small_table):
    database, t = small_table
    with database.connect(results=False, autocommit=True) as c:
        # an explicit default and an omitted option are one build; another m is another
        c.execute(f"CREATE INDEX {t}_m16 ON {t} USING hnsw (e vector_cosine_ops) WITH (m = 16)")
        # a partial index, another distance, another expression: no design's build
        c.execute(f"CREATE INDEX {t}_part ON {t} USING hnsw (e vector_cosine_ops) WHERE id > '5'")
        c.execute(f"CREATE INDEX {t}_l2 ON {t} USING hnsw (e vector_l2_ops)")
        c.execute(
            f"CREATE INDEX {t}_norm ON {t} USING hnsw ((l2_normalize(e)::vector(8)) vector_cosine_ops)"
        )
        # the cast expressions hnsw-halfvec, hnsw-bq and ivfflat-halfvec search
        c.execute(
            f"CREATE INDEX {t}_half ON {t} USING hnsw ((e::halfvec(8)) halfvec_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )
        c.execute(
            f"CREATE INDEX {t}_bq ON {t} USING hnsw ((binary_quantize(e)::bit(8)) bit_hamming_ops)"
        )
        c.execute(
            f"CREATE INDEX {t}_ivfh ON {t} USING ivfflat ((e::halfvec(8)) halfvec_cosine_ops) "
            "WITH (lists = 50)"
        )
    got = _matched(database)
    assert got == {
        "hnsw m=16": f"{t}_m16",
        "hnsw m=8": None,
        "hnsw-halfvec m=16": f"{t}_half",
        "hnsw-bq m=16": f"{t}_bq",
        "ivfflat lists=100": None,
        "ivfflat-halfvec lists=100": None,  # lists 50 is another build
    }
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP INDEX {t}_m16")
        c.execute(
            f"CREATE INDEX {t}_ef ON {t} USING hnsw (e vector_cosine_ops) WITH (ef_construction = 128)"
        )
        c.execute(
            f"CREATE INDEX {t}_ivf ON {t} USING ivfflat (e vector_cosine_ops) WITH (lists = '100')"
        )
    got = _matched(database)
    assert got["hnsw m=16"] is None  # ef_construction 128 is not the default 64
    assert got["ivfflat lists=100"] == f"{t}_ivf"


# -- advise on a table with the default HNSW index -------------------------------------------------

TABLE, TARGET, INDEX = "inplace_kb", "inplace", "inplace_kb_hnsw"


@pytest.fixture(scope="module")
def kb(database, tmp_path_factory):
    _, _, path = clustered_kb.build(
        database,
        tmp_path_factory.mktemp("inplace"),
        TABLE,
        dim=DIM,
        n=N,
        nq=NQ,
        seed=7,
        spread=0.6,
        indexes=[f"CREATE INDEX {INDEX} ON {TABLE} USING hnsw (e vector_cosine_ops)"],
    )
    pg = Pgeval(database)
    pg.add_target(TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield pg, path
    clustered_kb.drop(database, TABLE)


@pytest.fixture(scope="module")
def advised(kb):
    pg, path = kb
    return pg.advise(
        TARGET, queries_file=path, target_recall=0.95, settings=SMALL, designs=("hnsw", "ivfflat")
    )


@pytest.mark.slow
def test_the_index_the_table_has_is_measured_in_place(kb, advised, conn):
    d = advised.as_dict()
    json.dumps(d)
    hnsw, ivf = (next(r for r in d["designs"] if r["design"] == k) for k in ("hnsw", "ivfflat"))
    oid, size = conn.execute(
        "SELECT %s::regclass::oid::bigint, pg_relation_size(%s::regclass)", (INDEX, INDEX)
    ).fetchone()
    assert hnsw["in_place"] == {
        "name": INDEX,
        "oid": oid,
        "bytes": size,
        "definition": hnsw["in_place"]["definition"],
    }
    assert "USING hnsw" in hnsw["in_place"]["definition"]
    assert hnsw["build_ms"] is None and hnsw["index_bytes"] == size and hnsw["index"] == INDEX
    assert hnsw["points"]  # the find's values, for the plot
    assert ivf["in_place"] is None and ivf["build_ms"] > 0  # built on a scratch copy
    # every point of the hnsw sweep ran on the table through that index, and the runs'
    # fingerprints name that index (its oid), no scratch copy
    rows = conn.execute(
        "SELECT s.settings, s.build, r.params->>'index', r.fingerprint "
        "FROM pgeval.sweep_point s JOIN pgeval.run r ON r.run_id = s.run_id "
        "WHERE s.sweep_id = %s",
        (hnsw["at"]["sweep_id"],),
    ).fetchall()
    assert rows
    for _, build, used, fp in rows:
        assert build == {} and used == INDEX
        assert fp["indexes"][INDEX]["build"]["oid"] == oid
        assert "scratch" not in fp["indexes"] and not fp["target"].get("scratch_copy")
    from evaluator.measure import operating_points as stored

    summary = stored.summary(conn, hnsw["at"]["sweep_id"])  # SweepResult.points' rows
    assert summary and all(p["index"] == INDEX for p in summary)


@pytest.mark.slow
def test_keeping_the_index_prints_no_create_index(kb, pgeval, tmp_path):
    _, path = kb
    page = tmp_path / "advise.html"
    args = ["advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0]]
    code, out, err = pgeval(*args, "--designs", "hnsw", "--format", "json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["design"] == "hnsw" and rec["in_place"] == INDEX and rec["keep"] == INDEX
    assert rec["ddl"] is None and rec["supersedes"] == []
    assert rec["rollback"] == [
        s.replace(" SET ", " RESET ").split(" = ")[0] for s in rec["settings_sql"]
    ]
    assert "measured in place" in rec["why"] and "graph you build" not in rec["why"]
    code, out, err = pgeval(*args, "--designs", "hnsw", "--report", str(page))
    assert code == 0, err
    assert "CREATE INDEX" not in out and f"keep {INDEX} (the index your table has); set:" in out
    assert f"measuring {INDEX} in place" in err
    for s in rec["settings_sql"]:
        assert f"  {s};" in out.splitlines()
    doc = page.read_text(encoding="utf-8")
    assert "CREATE INDEX" not in doc and f"Keep {INDEX}" in doc


@pytest.mark.slow
def test_a_new_index_names_the_one_it_supersedes_and_its_rollback(kb, pgeval, database, tmp_path):
    _, path = kb
    page = tmp_path / "advise.html"
    args = ["advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0]]
    code, out, err = pgeval(*args, "--designs", "ivfflat", "--format", "json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["design"] == "ivfflat" and rec["keep"] is None and rec["in_place"] is None
    new = rec["ddl"].split('"')[1]
    assert rec["ddl"].startswith("CREATE INDEX CONCURRENTLY")
    [old] = rec["supersedes"]
    assert old["name"] == INDEX and old["method"] == "hnsw" and old["serves_statement"] is True
    assert old["drop"] == f'DROP INDEX CONCURRENTLY "{INDEX}"'
    assert set(old["setting"]) == {"hnsw.ef_search"}
    with database.connect(results=False, autocommit=True) as c:
        db = c.execute("SELECT current_database()").fetchone()[0]
    assert rec["rollback"] == [
        f'DROP INDEX CONCURRENTLY "{new}"',
        f'ALTER DATABASE "{db}" RESET ivfflat.probes',
    ]
    assert f"--index {new} --find ivfflat.probes" in rec["drop_old"]
    assert INDEX in rec["planner"] and "may keep choosing it" in rec["planner"]
    code, out, err = pgeval(*args, "--designs", "ivfflat", "--report", str(page))
    assert code == 0, err
    doc = page.read_text(encoding="utf-8")
    for s in (rec["ddl"], rec["planner"], *rec["rollback"], old["drop"]):
        assert html.escape(s) in doc, s
    lines = out.splitlines()
    assert f"  {rec['ddl']};" in lines and f"  {old['drop']};" in lines
    assert all(f"  {s};" in lines for s in rec["rollback"])
    assert "the indexes you have: " + rec["planner"] in out
    # the rollback runs as printed (nothing was built: it fails only on the missing index)
    with database.connect(results=False, autocommit=True) as c:
        c.execute(rec["settings_sql"][0])
        c.execute(rec["rollback"][1])
        left = c.execute(
            "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase "
            "WHERE d.datname = current_database() AND s.setrole = 0 "
            "AND EXISTS (SELECT 1 FROM unnest(s.setconfig) x WHERE x LIKE 'ivfflat.probes=%%')"
        ).fetchone()[0]
    assert left == 0


@pytest.mark.slow
def test_an_index_the_planner_does_not_choose_is_measured_on_a_scratch_copy(kb, pgeval, database):
    """A DiskANN index beside the HNSW one: the planner serves the hnsw design's statement with
    DiskANN, so the HNSW index cannot be measured through; the design is built on a scratch
    copy (a warning says why) and keeping the HNSW index says its figures are the copy's."""
    _, path = kb
    with database.connect(results=False, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vectorscale CASCADE")
        c.execute(f"CREATE INDEX {TABLE}_disk ON {TABLE} USING diskann (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    try:
        code, out, err = pgeval(
            "advise", "--target", TARGET, "--queries-file", str(path), "--set", SMALL[0],
            "--designs", "hnsw", "--format", "json",
        )  # fmt: skip
    finally:
        with database.connect(results=False, autocommit=True) as c:
            c.execute(f"DROP INDEX {TABLE}_disk")
    assert code == 0, err
    doc = json.loads(out)
    [row] = doc["designs"]
    assert row["in_place"] is None and row["in_place_refused"] == INDEX and row["build_ms"] > 0
    assert f"{TABLE}_disk" in err and "measured on a scratch copy instead" in err
    rec = doc["recommendation"]
    assert rec["ddl"] is None and rec["keep"] == INDEX  # never a twin of the table's index
    assert f"it is the build of {INDEX}, which your table has" in rec["why"]
    # the index serving the statement in its place is named, as what to drop for it to serve
    assert [(o["name"], o["serves_statement"]) for o in rec["supersedes"]] == [
        (f"{TABLE}_disk", True)
    ]
    assert "Measured on a scratch copy" in rec["planner"] and f"{TABLE}_disk" in rec["planner"]
    assert f"--index {INDEX} --find hnsw.ef_search" in rec["drop_old"]


@pytest.fixture
def tenants(database):
    import numpy as np

    table, rng = "inplace_tenants", np.random.default_rng(11)
    centers = rng.normal(size=(30, DIM))
    docs = (centers[rng.integers(0, 30, N)] + 0.6 * rng.normal(size=(N, DIM))).astype(np.float32)
    tenant = np.array(["big"] * N, dtype=object)
    tenant[rng.permutation(N)[:300]] = "small"
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, e vector({DIM}), tenant text)")
        with c.cursor().copy(f"COPY {table} (id, e, tenant) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i + 1}", clustered_kb.vtext(v), tenant[i]))
        c.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {table}")
    Pgeval(database).add_target(
        "inplace-tenants", table=table, id_column="id", vector_column="e", replace=True
    )
    yield table
    clustered_kb.drop(database, table)


@pytest.mark.slow
def test_per_tenant_the_index_is_measured_in_place_in_every_group(tenants, pgeval, conn):
    """--group-by: the table's HNSW index is measured in place in every tenant's sweep; the
    recommendation keeps it, or names it as what the new index supersedes."""
    index = f"{tenants}_hnsw"
    code, out, err = pgeval(
        "advise", "--target", "inplace-tenants", "--sample-queries", "20", "--group-by",
        "tenant", "--designs", "hnsw,ivfflat", "--target-recall", "0.9", "--set", SMALL[0],
        "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    hnsw = next(r for r in doc["designs"] if r["design"] == "hnsw")
    assert hnsw["in_place"]["name"] == index and hnsw["build_ms"] is None
    assert set(hnsw["sweeps"]) == {"big", "small"}
    for sweep in hnsw["sweeps"].values():
        rows = conn.execute(
            "SELECT s.build, r.params->>'index' FROM pgeval.sweep_point s "
            "JOIN pgeval.sweep w USING (sweep_id) JOIN pgeval.run r ON r.run_id = s.run_id "
            "WHERE w.name = %s",
            (sweep,),
        ).fetchall()
        assert rows and all(b == {} and used in (index, None) for b, used in rows)
        assert any(used == index for _, used in rows)
    rec = doc["recommendation"]
    if rec["design"] == "hnsw":
        assert rec["ddl"] is None and rec["keep"] == index
    else:
        assert rec["ddl"].startswith("CREATE INDEX CONCURRENTLY")
        assert [(o["name"], o["serves_statement"]) for o in rec["supersedes"]] == [(index, True)]
        assert "may keep choosing it" in rec["planner"]
