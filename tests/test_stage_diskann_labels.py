"""The ``diskann-labels`` design (issue 49, item 2) on the real server: pgvectorscale's DiskANN on
``(e, labels)``, each tenant searched as ``WHERE labels && ARRAY[$2]::smallint[]``.

A table of three tenants with text ids (70 %, 25 %, 5 %): advise builds the design once on a
scratch copy with a label column derived from the tenant (text ids: a label per tenant, 1, 2, 3 in
byte order, printed), measures every tenant with the rewritten statement, and

- each tenant's recall is numpy's on the ranked lists that statement returned (exact search
  within the tenant, computed here from the vectors);
- the printed DDL (the generated label column, the index) applied to a copy of the table works:
  the printed statement runs there, the planner uses the index, every row it returns is the
  tenant's, and a row inserted later gets its tenant's label;
- the labels of ids that do not fit a smallint (text, bigints beyond smallint) are numbered and
  printed; integer ids within smallint are their own labels.
"""

from __future__ import annotations

import clustered_kb
import numpy as np
import pytest
from test_sweep_build import scratch_schemas

from evaluator.api import Pgeval
from evaluator.core.errors import InputError

pytestmark = pytest.mark.slow

TABLE, TARGET, DIM, N, K, R = "labels_kb", "labels-kb", 32, 3000, 10, 0.9
SHARES = {"acme": 0.70, "globex": 0.25, "initech": 0.05}
SETTINGS = ["enable_seqscan=off", "work_mem=4322kB"]  # this module's points
# a sparser graph than the default 50 neighbours: 5 s to build 3,000 rows with labels, not 30
BUILD = "diskann-labels:num_neighbors=20"


@pytest.fixture(scope="module")
def kb(database):
    rows = clustered_kb.tenant_table(database, TABLE, dim=DIM, n=N, shares=SHARES, seed=5)
    pg = Pgeval(database)
    pg.add_target(TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield pg, rows
    clustered_kb.drop(database, TABLE)


@pytest.fixture(scope="module")
def advised(kb, tmp_path_factory):
    pg, _ = kb
    report = tmp_path_factory.mktemp("labels") / "advise.html"
    res = pg.advise(
        TARGET,
        report=report,
        sample_queries=60,
        designs=["diskann-labels"],
        build=[BUILD],
        group_by="tenant",
        target_recall=R,
        settings=SETTINGS,
    )
    return {**res.as_dict(), "html": report.read_text(encoding="utf-8")}


def _exact(rows: dict, tenant: str, q: str) -> list[float]:
    """numpy's K nearest cosine distances to row ``q`` within ``tenant``, ``q`` itself left out."""
    ids = [i for i, (_, t) in rows.items() if t == tenant and i != q]
    mat = np.stack([rows[i][0] for i in ids]).astype(np.float64)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    v = rows[q][0].astype(np.float64)
    return sorted(1 - mat @ (v / np.linalg.norm(v)))[:K]


def _recall(rows: dict, tenant: str, q: str, got: list[str]) -> float:
    """Index recall@K of ``got`` (hits: within numpy's K-th distance, docs/METRICS.md)."""
    exact = _exact(rows, tenant, q)
    v = rows[q][0].astype(np.float64)
    v /= np.linalg.norm(v)
    d_k = exact[-1]
    dist = [1 - float(rows[i][0] @ v) / float(np.linalg.norm(rows[i][0])) for i in got]
    return sum(1 for d in dist if d <= d_k + 1e-6) / len(exact)


def test_measured_with_its_rewritten_statement(advised, conn):
    d = advised
    (row,) = d["designs"]
    assert row["design"] == "diskann-labels" and set(row["sweeps"]) == set(SHARES)
    rec = d["recommendation"]
    assert rec is not None, d["unmet"]
    change = rec["statement_change"]
    # text ids: one label per tenant, 1, 2, 3 in byte order of the id, printed
    assert change["labels"] == {t: i for i, t in enumerate(sorted(SHARES), 1)}
    assert change["identity"] is False and change["column"] == "labels"
    assert rec["why"].startswith("this design changes the statement your application sends")
    assert "'initech' -> 3" in rec["why"]
    assert '"labels" && ARRAY[$2]::smallint[]' in rec["query_sql"]
    assert '"tenant"' not in rec["query_sql"]
    assert rec["query_params"] == ["<the query vector>", "<the label of a tenant>"]
    assert 'USING diskann ("e" vector_cosine_ops, "labels")' in rec["ddl"]
    assert rec["rollback"][:2] == [
        f'DROP INDEX CONCURRENTLY "{rec["ddl"].split()[3].strip(chr(34))}"',
        f'ALTER TABLE "{TABLE}" DROP COLUMN "labels"',
    ]
    assert scratch_schemas(conn) == []
    # the report: the label column before the index in what to apply
    html = d["html"].split('<pre id="apply">', 1)[1].split("</pre>", 1)[0]
    assert html.index("ADD COLUMN &quot;labels&quot;") < html.index("USING diskann")


def test_each_tenants_recall_is_numpys_on_that_statement(advised, kb, conn):
    """Every tenant's recall at the design's setting, recomputed here from the ranked lists its
    statement returned (stored by the sweep) against numpy's exact search within the tenant."""
    _, rows = kb
    (row,) = advised["designs"]
    setting = {k: str(v) for k, v in row["setting"].items()}
    for g in row["groups"]:
        tenant = g["group"]
        run_id, params = conn.execute(
            "SELECT sp.run_id, r.params FROM pgeval.sweep_point sp JOIN pgeval.sweep s "
            "USING (sweep_id) JOIN pgeval.run r ON r.run_id = sp.run_id WHERE s.name = %s "
            "AND sp.settings @> %s::jsonb ORDER BY sp.repetition LIMIT 1",
            (row["sweeps"][tenant], __import__("json").dumps(setting)),
        ).fetchone()
        lists: dict[str, list[str]] = {}
        for q, c in conn.execute(
            "SELECT query_id, chunk_id FROM pgeval.result WHERE run_id = %s ORDER BY query_id, rank",
            (run_id,),
        ):
            lists.setdefault(q, []).append(c)
        assert lists and all(rows[c][1] == tenant for got in lists.values() for c in got)
        mine = np.mean(
            [_recall(rows, tenant, q, [c for c in got if c != q][:K]) for q, got in lists.items()]
        )
        assert g["recall"] == pytest.approx(mine, abs=1e-9), tenant
        assert params["index"].endswith("_diskann")  # the scratch copy's label index
        # the statement timed: the group by its label, as the application would send it
        assert '"labels" && ARRAY[%(f0)s]::smallint[]' in params["timed_statement"]
        assert '"tenant"' not in params["timed_statement"]


def test_printed_ddl_applied_to_a_copy_works(advised, kb, database):
    _, rows = kb
    rec = advised["recommendation"]
    copy = f"{TABLE}_copy"
    on_copy = [
        s.replace(f'"{TABLE}"', f'"{copy}"')
        for s in (rec["statement_change"]["column_sql"], rec["ddl"], rec["query_sql"])
    ]
    labels = rec["statement_change"]["labels"]
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {copy}")
        c.execute(f"CREATE TABLE {copy} AS SELECT id, e, tenant FROM {TABLE}")
        try:
            c.execute("SET max_parallel_maintenance_workers = 0")
            c.execute(on_copy[0])  # the generated label column
            c.execute(on_copy[1])  # the index (its name as printed: the table has none of it)
            c.execute(f"ANALYZE {copy}")
            c.execute(
                f"INSERT INTO {copy} VALUES ('new', %s, 'globex')",
                (clustered_kb.vtext(rows["c1"][0]),),
            )
            got = dict(c.execute(f"SELECT tenant, labels FROM {copy} GROUP BY 1, 2").fetchall())
            assert got == {t: [n] for t, n in labels.items()}
            for n, v in rec["setting"].items():
                c.execute("SELECT set_config(%s, %s, false)", (n, str(v)))
            stmt = on_copy[2].replace("$1", "%(v)s").replace("$2", "%(g)s")
            tenant = "initech"  # the smallest: a post-filter would leave it short
            queries = [i for i, (_, t) in rows.items() if t == tenant][:20]
            plan = "\n".join(
                r[0]
                for r in c.execute(
                    "EXPLAIN " + stmt,
                    {"v": clustered_kb.vtext(rows[queries[0]][0]), "g": labels[tenant]},
                )
            )
            assert "Index Scan using" in plan and "diskann" in plan, plan
            recall = []
            for q in queries:
                got = [
                    r[0]
                    for r in c.execute(
                        stmt.replace(f"LIMIT {K}", f"LIMIT {K + 1}"),
                        {"v": clustered_kb.vtext(rows[q][0]), "g": labels[tenant]},
                    )
                ]
                assert all(rows[i][1] == tenant for i in got)
                recall.append(_recall(rows, tenant, q, [i for i in got if i != q][:K]))
            assert np.mean(recall) >= R - 0.05
        finally:
            c.execute(f"DROP TABLE IF EXISTS {copy}")


@pytest.mark.parametrize(
    "kind, values, identity, expected",
    [
        ("bigint", [5, 70000, -3, 5], False, {"-3": 1, "5": 2, "70000": 3}),
        ("integer", [300, 1, 2], True, {"1": 1, "2": 2, "300": 300}),
        ("text", ["2", "10"], False, {"10": 1, "2": 2}),  # digits in text: the app sends text
    ],
)
def test_labels_of_ids_that_do_not_fit_a_smallint(database, kind, values, identity, expected):
    """The labels read from a table, printed, and the generated column as printed gives every
    row its group's label (NULL group: a NULL label)."""
    from psycopg import sql

    from evaluator.table import labels
    from evaluator.targets.targets import Target

    table = "labels_ids"
    with database.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(f"CREATE TABLE {table} (id int, tenant {kind})")
        c.cursor().executemany(
            f"INSERT INTO {table} VALUES (%s, %s)", list(enumerate([*values, None]))
        )
        try:
            got = labels.read(c, Target("t", table, "id", "e"), "tenant")
            assert (got.identity, dict(got.ids)) == (identity, expected)
            words = got.words()
            if not identity:
                assert all(f"{v!r} -> {n}" in words for v, n in expected.items()), words
            c.execute(got.add_column(sql.Identifier(table)))
            stored = c.execute(f"SELECT tenant::text, labels FROM {table}").fetchall()
            assert {t: lab for t, lab in stored} == {
                **{v: [n] for v, n in expected.items()},
                None: [None],
            }
        finally:
            c.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_default_design_where_advise_groups():
    from evaluator.kinds import registry
    from evaluator.tuning.advise.config import AdviseConfig
    from evaluator.tuning.advise.plan import designs

    assert "diskann-labels" not in registry.advise_kinds()
    assert registry.advise_kinds(grouped=True)[-1] == "diskann-labels"
    available = list(registry.ann_kinds())
    grouped = [d.kind for d in designs(AdviseConfig(target="t"), available, {}, grouped=True)]
    assert "diskann-labels" in grouped
    assert "diskann-labels" not in [
        d.kind for d in designs(AdviseConfig(target="t"), available, {})
    ]
    with pytest.raises(InputError, match="one group at a time"):
        designs(AdviseConfig(target="t", designs=("diskann-labels",)), available, {})


def test_printed_the_statement_change_first(advised, pgeval):
    """The command's text (every point reused from the module's advise: nothing built again):
    the change of statement said first, the label column before the index, the new statement."""
    code, out, err = pgeval(
        *f"advise --target {TARGET} --sample-queries 60 --designs diskann-labels "
        f"--group-by tenant --target-recall {R} --set enable_seqscan=off "
        f"--set work_mem=4322kB --build {BUILD}".split()
    )
    assert code == 0, err
    lines = out.splitlines()
    rec = next(i for i, line in enumerate(lines) if line.startswith("recommended: "))
    assert lines[rec].startswith(
        "recommended: this design changes the statement your application sends"
    )
    column = next(i for i, line in enumerate(lines) if 'ADD COLUMN "labels"' in line)
    index = next(i for i, line in enumerate(lines) if "USING diskann" in line)
    assert rec < column < index
    sent = next(line for line in lines if line.startswith("the statement your application must"))
    assert sent.endswith(advised["recommendation"]["query_sql"])
    assert "with $1 <the query vector>, $2 <the label of a tenant>" in out


def test_refused_without_groups_in_one_line(kb, pgeval, conn):
    """Ungrouped, the design has no label to search by: one line naming the option, exit 1,
    before any work (no sweep stored, no scratch copy left)."""
    before = conn.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0]
    code, out, err = pgeval(
        *f"advise --target {TARGET} --sample-queries 10 --designs diskann-labels".split()
    )
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        "pgeval: error: field '--designs': design diskann-labels searches one group at a time "
        "by its label: give --group-by COLUMN (the column the application filters by)"
    ]
    assert conn.execute("SELECT count(*) FROM pgeval.sweep").fetchone()[0] == before
    assert scratch_schemas(conn) == []
