"""Benchmark: `pgeval advise --group-by tenant` on a table laid out as multi-tenant applications
lay it out, its recommendation applied and measured by hand as the application gets it.

A table of --rows x --dim seeded clustered vectors, 10 tenants assigned at random (30 % down to
0.5 %), a btree on the tenant column and an HNSW index with pgvector's defaults (the index the
table has), on a fresh embedded server (or --dsn). Per tenant, --queries query vectors around the
same centres that are not rows of the table (held out), exact top K within the tenant by numpy.

(a) `advise --group-by tenant --sample-queries S` over --designs, timed;
(b) its recommendation applied as printed (any DDL, then the settings SQL), and the printed
    statement (`... WHERE tenant = $2 ORDER BY ... LIMIT K`) run per held-out query in new
    sessions, two ways: one-shot (custom plans, as psycopg 2 and most ORMs send it) and prepared
    under plan_cache_mode = force_generic_plan (the plan a server settles on after five
    executions, as psycopg 3 and JDBC do); per tenant: rows, the plan (the ANN index or the
    btree), recall@K by pgeval's rule (rows within the K-th exact distance) against advise's
    figure for the tenant and the target;
(c) with --twice, a second `advise --fresh`: the same design, or a why that says the two were
    within noise;
(d) the scan modes (issue 49): advise searches the index in place with the iterative scan off
    (the database-wide ef_search) and in each iterative mode; where it recommends an iterative
    mode, the database-wide setting (the scan off's least ef_search) is measured the same way
    by hand, and both are printed per tenant with their work (ef_search) and p95 (wall time of
    the printed statement per query, nearest rank, in this run): the ratio of the two p95s.
    ``--shares 60,30,8,1,1 --no-btree`` lays the table out as the issue measured it (every
    tenant through the HNSW index, post-filtered).

Printed: the wall time, the recommendation, a table per tenant, and whether every tenant reaches
the target by hand (custom plans; generic plans beside them). The index and settings are removed
afterwards.

Usage: python bench/advise_tenants.py [--rows 50000] [--dim 384] [--queries 40] [--sample 30]
       [--designs hnsw,ivfflat] [--target-recall 0.95] [--twice] [--dsn DSN]
       [--shares 60,30,8,1,1] [--no-btree] [--find-max 1000] [--spread 0.9]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

K = 10
TABLE, TARGET = "tenant_bench", "tenant-bench"
SHARES = (0.30, 0.20, 0.15, 0.10, 0.08, 0.06, 0.05, 0.03, 0.025, 0.005)


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=40, help="held-out queries per tenant")
    p.add_argument("--sample", type=int, default=30, help="advise's --sample-queries per tenant")
    p.add_argument("--designs", default="hnsw,ivfflat")
    p.add_argument("--target-recall", type=float, default=0.95)
    p.add_argument("--twice", action="store_true", help="a second advise --fresh")
    p.add_argument("--dsn", default=None)
    p.add_argument("--shares", default=None, help="tenant shares in %%, e.g. 60,30,8,1,1")
    p.add_argument("--no-btree", action="store_true", help="no btree on the tenant column")
    p.add_argument("--find-max", type=int, default=1000)
    p.add_argument("--spread", type=float, default=0.9, help="noise around the cluster centres")
    args = p.parse_args()
    if args.rows > 200_000:
        p.error("--rows: at most 200,000")
    return args


def table(db, rows: int, dim: int, nq: int, shares=SHARES, btree: bool = True, spread=0.9):
    """The table, its indexes and target; (docs, tenant of each doc, queries per tenant)."""
    from evaluator.api import Pgeval

    rng = np.random.default_rng(7)
    centers = rng.normal(size=(64, dim))

    def around(n: int) -> np.ndarray:
        return (centers[rng.integers(0, 64, n)] + spread * rng.normal(size=(n, dim))).astype(
            np.float32
        )

    docs = around(rows)
    p = np.array(shares, dtype=float) / sum(shares)
    tenant = np.array([f"t{i:02d}" for i in rng.choice(len(p), size=rows, p=p)])
    queries = {t: around(nq) for t in sorted(set(tenant))}
    with db.connect(results=False, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, e vector({dim}), tenant text)")
        with c.cursor().copy(f"COPY {TABLE} (id, e, tenant) FROM STDIN") as cp:
            for i, v in enumerate(docs):
                cp.write_row((f"c{i}", "[" + ",".join(f"{x:.6g}" for x in v) + "]", tenant[i]))
        if btree:
            c.execute(f"CREATE INDEX {TABLE}_tenant ON {TABLE} (tenant)")
        c.execute("SET maintenance_work_mem = '1GB'")
        c.execute(f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (e vector_cosine_ops)")
        c.execute(f"ANALYZE {TABLE}")
    Pgeval(db).add_target(
        TARGET, table=TABLE, id_column="id", vector_column="e", group_by="tenant", replace=True
    )
    return docs, tenant, queries


def advise(db, args, *, fresh: bool) -> tuple[dict, float]:
    from evaluator.api import Pgeval

    t0 = time.perf_counter()
    res = Pgeval(db).advise(
        TARGET,
        sample_queries=args.sample,
        target_recall=args.target_recall,
        designs=args.designs.split(","),
        group_by="tenant",
        fresh=fresh,
        find_max=args.find_max,
    )
    return res.as_dict(), time.perf_counter() - t0


def _cosine(docs: np.ndarray, q: np.ndarray) -> np.ndarray:
    return 1.0 - (docs @ q) / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))


def _sent(stmt: str) -> str:
    """The printed statement with psycopg's named placeholders (``$1`` may appear twice)."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", stmt)


def _plan(c, stmt: str, v: str, t: str, generic: bool) -> str:
    """The indexes the plan scans, in a few words."""
    from psycopg import sql

    if generic:
        c.execute("SET plan_cache_mode = force_generic_plan")
        c.execute(f"PREPARE bench_stmt (vector, text) AS {stmt}")
        lines = c.execute(
            sql.SQL("EXPLAIN EXECUTE bench_stmt({}, {})").format(sql.Literal(v), sql.Literal(t))
        ).fetchall()
        c.execute("DEALLOCATE bench_stmt")
        c.execute("RESET plan_cache_mode")
    else:
        lines = c.execute("EXPLAIN " + _sent(stmt), {"p1": v, "p2": t}).fetchall()
    used = sorted(
        {m for (line,) in lines for m in re.findall(r"Scan (?:using|on) (\S+)", line)} - {TABLE}
    )
    return ",".join(used) or "seq scan"


def by_hand(db, rec: dict, docs, tenant, queries, generic: bool, settings=None) -> dict[str, tuple]:
    """Per tenant: (recall@K by pgeval's rule, the plan, the p95 ms) of the printed statement;
    ``settings``: set in each session (the database-wide alternative), else as applied."""
    import psycopg

    from evaluator.core.vector_literal import vector_literal

    stmt = rec["query_sql"]
    out = {}
    for t, qs in queries.items():
        mask = tenant == t
        ids = np.flatnonzero(mask)
        total = 0.0
        with psycopg.connect(db.uri(), autocommit=True, prepare_threshold=None) as c:
            plan = _plan(c, stmt, vector_literal(qs[0]), t, generic)
            for name, value in (settings or {}).items():
                c.execute("SELECT set_config(%s, %s, false)", (name, str(value)))
            if generic:
                c.execute("SET plan_cache_mode = force_generic_plan")
            took = []
            for q in qs:
                v = vector_literal(q)
                t0 = time.perf_counter()
                got = [r[0] for r in c.execute(_sent(stmt), {"p1": v, "p2": t}, prepare=generic)]
                took.append((time.perf_counter() - t0) * 1000)
                d = _cosine(docs[ids], q)
                d_k = np.sort(d)[min(K, len(d)) - 1]
                dist = {f"c{i}": x for i, x in zip(ids, d)}
                total += sum(1 for g in got if dist.get(g, np.inf) <= d_k + 1e-6) / min(K, len(d))
        out[t] = (total / len(qs), plan, _p95(took))
    return out


def _p95(values: list[float]) -> float:
    """Nearest rank, as pgeval's."""
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def applied(db, rec: dict):
    """Run the printed DDL (when the advice builds one) and settings SQL; return the undo."""
    name = None
    with db.connect(results=False, autocommit=True) as c:
        database = c.execute("SELECT current_database()").fetchone()[0]
        if rec.get("ddl") and not rec.get("keep"):
            name = rec["ddl"].split()[3].strip('"')
            c.execute("SET maintenance_work_mem = '1GB'")
            c.execute(rec["ddl"])
        for s in rec.get("settings_sql") or []:
            c.execute(s)

    def undo() -> None:
        with db.connect(results=False, autocommit=True) as c:
            if name:
                c.execute(f'DROP INDEX IF EXISTS "{name}"')
            for s in rec.get("settings_sql") or []:
                setting = s.split(" SET ", 1)[1].split(" = ")[0]
                c.execute(f'ALTER DATABASE "{database}" RESET {setting}')

    return undo


def scan_modes(db, d: dict, rec: dict, docs, tenant, queries, custom, goal: float) -> None:
    """(d) the recommendation against the database-wide setting (the scan off's least work),
    both measured by hand on the held-out queries through the printed statement."""
    print(f"(d) scan modes: {d.get('scan_modes_line')}")
    if d.get("unreachable_line"):
        print(f"    {d['unreachable_line']}")
    off = next((m for m in d.get("scan_modes") or [] if m["mode"] == "off"), None)
    if off is None or rec.get("scan_mode", "off") == "off":
        print("    the recommendation is the scan off: nothing to compare")
        return
    find = next(iter(rec["setting"]))
    if off["value"] is None:
        print("    the scan off reaches no value: the database-wide setting does not exist")
        return
    wide = by_hand(db, rec, docs, tenant, queries, generic=False, settings={find: off["value"]})
    print(
        f"    {'tenant':7} {'share':>6} {rec['scan_mode'] + ' ' + str(rec['setting'][find]):>22}"
        f" {'p95 ms':>7} {'off ' + str(off['value']):>10} {'p95 ms':>7}"
    )
    n = len(tenant)
    for t in queries:
        (r1, _, p1), (r0, _, p0) = custom[t], wide[t]
        share = (tenant == t).sum() / n * 100
        print(f"    {t:7} {share:5.1f}% {r1:22.4f} {p1:7.2f} {r0:10.4f} {p0:7.2f}")
    worst = max(p for _, _, p in custom.values())
    worst_off = max(p for _, _, p in wide.values())
    print(
        f"    work: {find} {rec['setting'][find]} against {off['value']} "
        f"({off['value'] / max(rec['setting'][find], 1):.1f}x less); slowest tenant's p95 "
        f"{worst:.2f} ms against {worst_off:.2f} ms ({worst / worst_off:.2f}x); every tenant "
        + ("reaches" if all(r >= goal - 1e-12 for r, *_ in custom.values()) else "does not reach")
        + f" {goal:g} with the recommendation"
    )


def main() -> None:
    import _server

    args = arguments()
    db, _tmp, stop = _server.start(args.dsn, "pgeval-bench-tenants-")
    try:
        shares = [float(x) for x in args.shares.split(",")] if args.shares else SHARES
        docs, tenant, queries = table(
            db, args.rows, args.dim, args.queries, shares, not args.no_btree, args.spread
        )
        print(
            f"table: {args.rows:,} x {args.dim}, tenants {len(queries)}, "
            + ("HNSW only" if args.no_btree else "btree + HNSW")
        )
        d, took = advise(db, args, fresh=True)
        rec = d.get("recommendation")
        print(f"(a) advise --group-by tenant: {took:.0f} s")
        if not rec:
            print("no recommendation:", d.get("no_recommendation") or d.get("why"))
            return
        print(f"    {rec['design']} {rec['setting']}: {rec['why'][:300]}")
        print(f"    statement: {rec['query_sql']}")
        for r in d["designs"]:
            print(
                f"    design {r['design']} {r['setting']}: reached {r['reached']}, p95 {r['p95_ms']}"
            )
        if rec.get("prepared"):
            print(f"    {rec['prepared']['line']}")
        row = next((r for r in d["designs"] if r.get("sweep") == rec.get("sweep")), {"groups": []})
        printed = {g["group"]: g.get("recall") for g in row.get("groups") or []}
        undo = applied(db, rec)
        try:
            custom = by_hand(db, rec, docs, tenant, queries, generic=False)
            generic = by_hand(db, rec, docs, tenant, queries, generic=True)
        finally:
            undo()
        print("(b) by hand, held-out queries, the planner's own plans")
        print(f"    {'tenant':7} {'rows':>7} {'advise':>7} {'custom':>7} {'generic':>8}  plan")
        for t in queries:
            rows = int((tenant == t).sum())
            said = printed.get(t)
            said_text = "—" if said is None else f"{said:.4f}"
            (rc, pc, _), (rg, pg_, _) = custom[t], generic[t]
            plans = pc if pc == pg_ else f"{pc} | generic {pg_}"
            print(f"    {t:7} {rows:7,} {said_text:>7} {rc:7.4f} {rg:8.4f}  {plans}")
        short = [t for t, (r, *_) in custom.items() if r < args.target_recall - 1e-12]
        print(
            "    every tenant reaches the target by hand (custom plans)"
            if not short
            else f"    below the target by hand (custom plans): {', '.join(short)}"
        )
        scan_modes(db, d, rec, docs, tenant, queries, custom, args.target_recall)
        if args.twice:
            d2, took2 = advise(db, args, fresh=True)
            rec2 = d2.get("recommendation") or {}
            same = (rec2.get("design"), rec2.get("build")) == (rec["design"], rec["build"])
            print(
                f"(c) advise --fresh again: {took2:.0f} s, "
                + ("the same design" if same else f"{rec2.get('design')}: {rec2.get('why')}")
            )
    finally:
        stop()


if __name__ == "__main__":
    main()
