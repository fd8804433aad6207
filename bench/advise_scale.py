"""Benchmark: `pgeval advise` on a large table (issue "advise on a million rows in minutes").

A table of --rows x --dim seeded clustered vectors (default 1,000,000 x 384) with an HNSW index
at pgvector's defaults, built once and kept for reruns when --datadir (or --dsn) is given, and
--queries sampled rows as queries (`--sample-queries`, as the README's recipe), target recall
--target-recall, the default designs (or --designs):

(1) `advise`: the HNSW index measured in place (the anchor), the other designs screened on a
    sample advise sizes (or --sample-rows), pruned, at most one built in full. Printed: its wall
    time (the issue asks at most 15 minutes at 1,000,000 rows, ground truth included), the
    split (ground truth, copies, builds, measuring), the designs dropped and why, the
    recommendation; then the recommendation applied as printed (its DDL with its SET, if any,
    and its settings) and re-measured by hand: the printed statement run per query in a new
    session, each sampled row's own row left out as pgeval leaves it out, recall@K against exact
    search by pgeval's rule, and whether it lands inside the printed 95 % interval.
(2) --full (the issue's 200,000-row run): advise again with every design built in full (on the
    held-out copy), and per design the setting screened on the sample against the one measured
    on the full build, and whether advise's choice is the one the full builds would have made.
(3) --groups: `advise --group-by tenant` on a table of --group-rows rows and 10 tenants (30 % to
    0.5 %, a btree on the tenant column, HNSW) against `advise` without it on the same table: the
    ratio (the issue asks at most 2).

Usage: python bench/advise_scale.py [--rows 1000000] [--dim 384] [--queries 300]
       [--datadir DIR | --dsn DSN] [--sample-rows N] [--designs ...] [--full] [--groups]
       [--groups-only] [--group-rows 50000] [--make-only] [--fresh] [--max-confirm-s S]

--fresh: every point measured again and every ground truth computed again (a kept table's
earlier advise would otherwise be read back: "stored"), so that the time printed is a first run's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

K = 10
TABLE, TARGET = "advise_scale", "advise-scale"
GROUPED, GROUPED_TARGET = "advise_scale_tenants", "advise-scale-tenants"
SHARES = [0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.05, 0.03, 0.015, 0.005]


def arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--target-recall", type=float, default=0.95)
    p.add_argument("--designs", default=None, help="default: advise's default designs")
    p.add_argument("--sample-rows", type=int, default=None, help="default: advise's choice")
    p.add_argument("--datadir", default=None, help="an embedded server kept between runs")
    p.add_argument("--dsn", default=None)
    p.add_argument("--full", action="store_true", help="(2): every design built in full too")
    p.add_argument("--groups", action="store_true", help="(3): --group-by against without")
    p.add_argument("--group-rows", type=int, default=50_000)
    p.add_argument("--groups-only", action="store_true", help="(3) alone")
    p.add_argument("--make-only", action="store_true", help="make the table (kept) and stop")
    p.add_argument("--fresh", action="store_true", help="measure and compute everything again")
    p.add_argument("--max-confirm-s", type=float, default=None, help="default: advise's")
    return p.parse_args()


def server(args):
    """(Database, stop): --dsn, a kept embedded server in --datadir, else a temporary one."""
    if args.datadir is None:
        import _server

        db, _, stop = _server.start(args.dsn, "pgeval-bench-scale-")
        return db, stop
    from evaluator.core import server as srv
    from evaluator.core.db import Database
    from evaluator.core.install import init

    os.environ["PGEVAL_DATADIR"] = str(Path(args.datadir).resolve())
    db = Database(datadir=Path(args.datadir).resolve())
    init(db)
    return db, lambda: srv.stop(db.datadir)


def vectors(rng, centers, n: int) -> np.ndarray:
    picked = centers[rng.integers(0, len(centers), n)]
    return (picked + 0.7 * rng.normal(size=(n, centers.shape[1]))).astype(np.float32)


def table(db, name: str, target: str, rows: int, dim: int, tenants: bool = False) -> float:
    """The table, its HNSW index (and tenant btree), its target; kept when it has ``rows`` rows
    already. Returns the seconds spent making it (0: kept)."""
    from evaluator.core.vector_literal import vector_literal
    from evaluator.dba.build_sweep import sized_memory
    from evaluator.targets.targets import Target, save

    with db.connect(results=False, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vectorscale CASCADE")
        have = c.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0]
        if have is not None and c.execute(f"SELECT count(*) FROM {name}").fetchone()[0] == rows:
            return 0.0
        t0 = time.perf_counter()
        rng = np.random.default_rng(11)
        centers = rng.normal(size=(64, dim))
        c.execute(f"DROP TABLE IF EXISTS {name}")
        tenant = ", tenant text" if tenants else ""
        c.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, e vector({dim}){tenant})")
        bounds = np.cumsum(SHARES)
        with c.cursor().copy(f"COPY {name} FROM STDIN") as cp:
            for start in range(0, rows, 10_000):
                for i, v in enumerate(vectors(rng, centers, min(10_000, rows - start)), start):
                    row = [f"c{i + 1}", vector_literal(v)]
                    if tenants:
                        row.append(f"t{int(np.searchsorted(bounds, rng.random()))}")
                    cp.write_row(row)
        # the graph held in memory, or the build slows about 3x (pgeval sizes its own builds so)
        memory = sized_memory(rows, dim, "vector", {})
        c.execute("SELECT set_config('maintenance_work_mem', %s, false)", (memory,))
        c.execute(f"CREATE INDEX {name}_hnsw ON {name} USING hnsw (e vector_cosine_ops)")
        if tenants:
            c.execute(f"CREATE INDEX {name}_tenant ON {name} (tenant)")
        c.execute(f"ANALYZE {name}")
    with db.connect(autocommit=True) as c:
        save(
            c,
            Target(target, name, "id", "e", distance="cosine", dimension=dim, unique_id=True),
            replace=True,
        )
    return time.perf_counter() - t0


def advise(db, target: str, args, **more):
    from evaluator.api import Pgeval

    designs = [d.strip() for d in (args.designs or "").split(",") if d.strip()]
    if getattr(args, "fresh", False):
        with db.connect() as c:  # (the stored exact answers of the bench's targets and copies)
            c.execute("DELETE FROM pgeval.ground_truth WHERE target LIKE %s", (f"{target}%",))
            c.commit()
        more["fresh"] = True
    if getattr(args, "max_confirm_s", None) is not None:
        more["max_confirm_s"] = args.max_confirm_s
    return Pgeval(db).advise(
        target,
        sample_queries=args.queries,
        target_recall=args.target_recall,
        designs=designs or None,
        on_design=lambda i, n, d, left: print(
            f"    design {i} of {n}: {d.label}"
            + ("" if left is None else f" (about {left:.0f} s)"),
            flush=True,
        ),
        **more,
    )


def by_hand(db, rec: dict, table_name: str) -> float:
    """The recommendation applied as printed (its SET and DDL, if any, then its settings; the
    old indexes it supersedes dropped, in a transaction rolled back after each query), the
    printed statement run per sampled query in a new session, each query's own row left out as
    pgeval leaves it out; recall@K by pgeval's rule (rows within the K-th exact distance). The
    index and settings it added are removed afterwards."""
    from evaluator.core.vector_literal import vector_literal

    with db.connect() as conn:
        rows = conn.execute(
            "SELECT q.query_id, q.embedding::text FROM pgeval.query q JOIN pgeval.sweep w "
            "USING (testset_id) WHERE w.name = %s ORDER BY q.position",
            (rec["sweep"],),
        ).fetchall()
    built = None
    with db.connect(results=False, autocommit=True) as c:
        database = c.execute("SELECT current_database()").fetchone()[0]
        if not rec.get("keep"):
            for s in rec.get("build_sql") or []:
                c.execute(s)
            c.execute(rec["ddl"])
            built = rec["ddl"].split()[3]
        for s in rec["settings_sql"]:
            c.execute(s)
    # the indexes the recommendation supersedes that serve its statement too: dropped inside
    # each query's transaction (rolled back after it), as once the new one is confirmed
    olds = [o["name"] for o in rec.get("supersedes") or [] if o.get("serves_statement")]
    total = 0.0
    try:
        with db.connect(results=False) as c:
            stmt = rec["query_sql"].replace("LIMIT 10", f"LIMIT {K + 1}").replace("$1", "%s")
            for qid, emb in rows:
                v = vector_literal(np.array(emb.strip("[]").split(","), dtype=np.float32))
                c.execute("SET LOCAL enable_indexscan = off")
                exact = c.execute(
                    f"SELECT id, e <=> %s::vector FROM {table_name} WHERE id <> %s "
                    f"ORDER BY 2 LIMIT {K}",
                    (v, qid),
                ).fetchall()
                c.rollback()
                d_k = exact[-1][1]
                for old in olds:
                    c.execute(f'DROP INDEX "{old}"')
                ids = [r[0] for r in c.execute(stmt, (v,) * stmt.count("%s")).fetchall()]
                ids = [i for i in ids if i != qid][:K]
                got = c.execute(
                    f"SELECT e <=> %s::vector FROM {table_name} WHERE id = ANY(%s)", (v, ids)
                ).fetchall()
                c.rollback()
                total += sum(1 for (d,) in got if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / K
    finally:
        with db.connect(results=False, autocommit=True) as c:
            if built:
                c.execute(f"DROP INDEX IF EXISTS {built}")
            for s in rec["settings_sql"]:
                setting = s.split(" SET ", 1)[1].split(" = ")[0]
                c.execute(f'ALTER DATABASE "{database}" RESET {setting}')
    return total / max(len(rows), 1)


def show(res, seconds: float) -> None:
    from evaluator.dba.advise.report import flow_lines

    d = res.as_dict()
    print(f"advise: {seconds:.1f} s")
    for r in d["designs"]:
        recall = "n/a" if r["recall"] is None else f"{r['recall']:.4f}"
        print(
            f"  {r['design']} {r['build']} {r['setting']}: recall {recall} "
            f"±{r.get('recall_margin') or 0:.4f} p95 {r['p95_ms'] or 0:.3f} ms, measured on "
            f"{r.get('measured_where')}"
        )
    for line in flow_lines(d):
        print(line)
    rec = d["recommendation"]
    print(f"recommended: {rec['why']}" if rec else f"no recommendation: {d['unmet']['why']}")


def full_builds(db, args, screened) -> None:
    """(2): every design built in full; per design its screened setting against the full one."""
    t0 = time.perf_counter()
    full = advise(db, TARGET, args, sample_rows=args.rows)
    print(f"(2) every design built in full: {time.perf_counter() - t0:.1f} s")
    by = {(r["design"], str(r["build"])): r for r in full.designs}
    for r in screened.designs:
        f = by.get((r["design"], str(r["build"])))
        screen = r.get("screened") or {}
        mine = screen.get("setting") if r["measured_on"] == "table" else r["setting"]
        on = f"a sample of {screen.get('rows'):,} rows" if screen else r["measured_where"]
        pred = r.get("predicted")
        said = ""
        if pred is not None and f is not None:
            value = (f["setting"] or {}).get(pred["setting"])
            low = pred["low"] if pred["low"] is not None else 0
            high = pred["high"] if pred["high"] is not None else float("inf")
            inside = value is not None and f["reached"] and low <= value <= high
            said = (
                f"; predicted {pred['value']} ({pred['low']}-{pred['high']}): the full build's "
                f"{value} is {'inside' if inside else 'OUTSIDE'}"
            )
        print(
            f"  {r['design']} {r['build']}: screened {mine} on {on}; "
            f"full build {None if f is None else f['setting']} on "
            f"{None if f is None else f['measured_where']}"
            + ("" if r["measured_on"] != "table" else f"; advise measured {r['setting']}")
            + said
        )
    a = screened.recommendation or {}
    b = full.recommendation or {}
    same = (a.get("design"), a.get("build")) == (b.get("design"), b.get("build"))
    print(
        f"  advise's choice {a.get('design')} {a.get('build')}; the full builds' "
        f"{b.get('design')} {b.get('build')}: {'the same' if same else 'DIFFERENT'}"
    )


def groups(db, args) -> None:
    """(3): advise --group-by tenant against advise without, on one tenant table."""
    made = table(db, GROUPED, GROUPED_TARGET, args.group_rows, args.dim, tenants=True)
    print(f"(3) tenant table {args.group_rows} x {args.dim}, 10 tenants ({made:.0f} s to make)")
    t0 = time.perf_counter()
    advise(db, GROUPED_TARGET, args)
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    advise(db, GROUPED_TARGET, args, group_by="tenant")
    grouped = time.perf_counter() - t0
    print(
        f"  advise {plain:.1f} s, advise --group-by tenant {grouped:.1f} s: ratio "
        f"{grouped / max(plain, 1e-9):.2f} (the issue asks at most 2)"
    )


def main() -> None:
    args = arguments()
    db, stop = server(args)
    try:
        if args.groups_only:
            groups(db, args)
            return
        made = table(db, TABLE, TARGET, args.rows, args.dim)
        if args.make_only:
            print(f"table {args.rows:,} x {args.dim} made in {made:.0f} s (0: kept)")
            return
        print(
            f"table {args.rows:,} x {args.dim} with HNSW (m 16, ef_construction 64) "
            + (f"made in {made:.0f} s" if made else "kept from an earlier run")
            + f"; {args.queries} sampled rows as queries, target recall@{K} {args.target_recall}"
        )
        t0 = time.perf_counter()
        res = advise(db, TARGET, args, sample_rows=args.sample_rows)
        show(res, time.perf_counter() - t0)
        rec = res.recommendation
        if rec is not None:
            got = by_hand(db, rec, TABLE)
            low = rec["recall"] - (rec.get("recall_margin") or 0)
            high = rec["recall"] + (rec.get("recall_margin") or 0)
            print(
                f"re-measured by hand, as printed: recall {got:.4f} against {rec['recall']:.4f} "
                f"reported (95 % interval {low:.4f}-{high:.4f}): "
                + ("inside" if low - 1e-9 <= got <= high + 1e-9 else "OUTSIDE")
            )
        if args.full:
            full_builds(db, args, res)
        if args.groups:
            groups(db, args)
    finally:
        stop()


if __name__ == "__main__":
    main()
