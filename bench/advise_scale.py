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
(4) the application's own queries (left out with --no-application): query vectors of the
    table's distribution that are not rows of it, sent by a role whose statements the server
    logs, captured (`pgeval queries capture`), advised on (`advise --captured`); each
    recommendation, from sampled rows and from captured queries, applied as printed and measured
    by numpy on other held-out query vectors sent through the application's statement.
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
import contextlib
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
    p.add_argument("--no-application", action="store_true", help="(4) left out")
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


def documents(rows: int, dim: int):
    """(centers, the table's vectors in chunks of 10,000), as :func:`table` writes them (a table
    without tenants: its seeded generator draws nothing else)."""
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(64, dim))
    return centers, (vectors(rng, centers, min(10_000, rows - s)) for s in range(0, rows, 10_000))


def table(db, name: str, target: str, rows: int, dim: int, tenants: bool = False) -> float:
    """The table, its HNSW index (and tenant btree), its target; kept when it has ``rows`` rows
    already (its target saved again). Returns the seconds spent making it (0: kept)."""
    from evaluator.targets.targets import Target, save

    with db.connect(results=False, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vectorscale CASCADE")
        have = c.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0]
        kept = (
            have is not None
            and c.execute("SELECT to_regclass(%s)", (f"{name}_hnsw",)).fetchone()[0] is not None
            and c.execute(f"SELECT count(*) FROM {name}").fetchone()[0] == rows
        )
        t0 = time.perf_counter()
    if not kept:
        _make(db, name, rows, dim, tenants)
    with db.connect(autocommit=True) as c:  # (saved again: a kept table may have lost it)
        save(
            c,
            Target(target, name, "id", "e", distance="cosine", dimension=dim, unique_id=True),
            replace=True,
        )
    return 0.0 if kept else time.perf_counter() - t0


def _make(db, name: str, rows: int, dim: int, tenants: bool) -> None:
    """The table of ``rows`` seeded vectors, its HNSW index (and tenant btree)."""
    from evaluator.core.vector_literal import vector_literal
    from evaluator.tuning.build_sweep import sized_memory

    with db.connect(results=False, autocommit=True) as c:
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
    source = {"captured": more.pop("captured")} if "captured" in more else {}
    return Pgeval(db).advise(
        target,
        sample_queries=None if source else args.queries,
        **source,
        target_recall=args.target_recall,
        designs=designs or None,
        on_design=lambda i, n, d, left: print(
            f"    design {i} of {n}: {d.label}"
            + ("" if left is None else f" (about {left:.0f} s)"),
            flush=True,
        ),
        **more,
    )


@contextlib.contextmanager
def applied(db, rec: dict):
    """The recommendation applied as printed (its SET and DDL, if any, then its settings), and
    removed afterwards. Yields the indexes it supersedes that serve its statement too: a caller
    drops them inside each query's transaction (rolled back after it), as once the new one is
    confirmed."""
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
    try:
        yield [o["name"] for o in rec.get("supersedes") or [] if o.get("serves_statement")]
    finally:
        with db.connect(results=False, autocommit=True) as c:
            if built:
                c.execute(f"DROP INDEX IF EXISTS {built}")
            for s in rec["settings_sql"]:
                setting = s.split(" SET ", 1)[1].split(" = ")[0]
                c.execute(f'ALTER DATABASE "{database}" RESET {setting}')


def by_hand(db, rec: dict, table_name: str) -> float:
    """The recommendation applied as printed (:func:`applied`), the printed statement run per
    sampled query in a new session, each query's own row left out as pgeval leaves it out;
    recall@K by pgeval's rule (rows within the K-th exact distance)."""
    from evaluator.core.vector_literal import vector_literal

    with db.connect() as conn:
        rows = conn.execute(
            "SELECT q.query_id, q.embedding::text FROM pgeval.query q JOIN pgeval.sweep w "
            "USING (testset_id) WHERE w.name = %s ORDER BY q.position",
            (rec["sweep"],),
        ).fetchall()
    total = 0.0
    with applied(db, rec) as olds, db.connect(results=False) as c:
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
    return total / max(len(rows), 1)


def application_recall(db, rec: dict, table_name: str, queries, docs) -> float:
    """The recommendation applied as printed, the APPLICATION's statement (``SELECT id FROM t
    ORDER BY e <=> $1 LIMIT 10``) run for each held-out query vector (not a row of the table),
    recall@K against numpy's exact search over the table's vectors."""
    from evaluator.core.vector_types import register_vector

    norms = np.linalg.norm(docs, axis=1)
    total = 0.0
    with applied(db, rec) as olds, db.connect(results=False) as c:
        register_vector(c)
        for q in queries:
            for old in olds:
                c.execute(f'DROP INDEX "{old}"')
            got = c.execute(
                f"SELECT id FROM {table_name} ORDER BY e <=> %s LIMIT {K}", (q,), binary=True
            ).fetchall()
            c.rollback()
            d = 1 - (docs @ q) / (norms * np.linalg.norm(q))
            truth = {f"c{i + 1}" for i in np.argpartition(d, K)[:K]}
            total += len({g[0] for g in got} & truth) / K
    return total / len(queries)


def show(res, seconds: float) -> None:
    from evaluator.tuning.advise.report import flow_lines

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


APP_ROLE, APP_SET = "advise_scale_app", "advise-scale-app"


def send_and_capture(db, queries) -> None:
    """The application: a role whose statements the server logs sends each query vector through
    its statement (prepared, binary, as psycopg 3 sends it); `pgeval queries capture` reads them
    from the embedded server's log into the captured set APP_SET."""
    import tempfile

    from psycopg.conninfo import make_conninfo

    from evaluator.api import Pgeval
    from evaluator.core.vector_types import register_vector

    log = Path(db.datadir) / "log"
    with db.connect(results=False, autocommit=True) as c:
        c.execute(
            f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') "
            f"THEN CREATE ROLE {APP_ROLE} LOGIN; END IF; END$$"
        )
        c.execute(f"GRANT SELECT ON {TABLE} TO {APP_ROLE}")
        c.execute(f"ALTER ROLE {APP_ROLE} SET log_min_duration_statement = 0")
    start = log.stat().st_size
    import psycopg

    with psycopg.connect(make_conninfo(db.uri(), user=APP_ROLE), autocommit=True) as app:
        register_vector(app)
        for q in queries:
            app.execute(f"SELECT id FROM {TABLE} ORDER BY e <=> %s LIMIT {K}", (q,), binary=True)
    time.sleep(0.5)
    with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as out, log.open("rb") as f:
        f.seek(start)
        out.write(f.read())
    rep = Pgeval(db).capture_queries([out.name], target=TARGET, name=APP_SET, replace=True)
    os.unlink(out.name)
    print(f"(4) the application sent {rep.searches} searches; captured {rep.queries} queries")


def application(db, args, sampled) -> None:
    """(4): the application's own queries. Query vectors of the table's distribution that are not
    rows of it: one set the application sends (logged, captured: `advise --captured`), another
    held out of everything. Each recommendation (sampled rows, captured queries) applied as
    printed and measured by numpy on the held-out vectors sent through the application's
    statement."""
    if args.dsn:
        print("(4) skipped: it reads the embedded server's log (no --dsn)")
        return
    centers, chunks = documents(args.rows, args.dim)
    docs = np.concatenate(list(chunks))
    rng = np.random.default_rng(2026)
    sent, held_out = vectors(rng, centers, args.queries), vectors(rng, centers, args.queries)
    send_and_capture(db, sent)
    t0 = time.perf_counter()
    captured = advise(db, TARGET, args, sample_rows=args.sample_rows, captured=APP_SET)
    print(f"advise --captured: {time.perf_counter() - t0:.1f} s")
    for what, res in (("--sample-queries", sampled), ("--captured", captured)):
        rec = res.recommendation
        if rec is None:
            print(f"  {what}: no recommendation")
            continue
        got = application_recall(db, rec, TABLE, held_out, docs)
        margin = rec.get("recall_margin") or 0
        meets = got >= args.target_recall - margin - 1e-9
        print(
            f"  {what}: {rec['planner']}; printed {rec['recall']:.4f} ±{margin:.4f} "
            f"({res.as_dict()['queries'].get('source')}); applied as printed, the application's "
            f"{len(held_out)} held-out queries get {got:.4f} (numpy): "
            + ("meets the target within the interval" if meets else "MISSES the target")
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
            where = (
                "inside"
                if low - 1e-9 <= got <= high + 1e-9
                else "above (the sampled rows are nodes of the index they search on the table: "
                "an upper bound)"
                if got > high
                else "BELOW"
            )
            print(
                f"re-measured by hand on the table, the sampled rows as pgeval leaves them out: "
                f"recall {got:.4f} against {rec['recall']:.4f} reported (95 % interval "
                f"{low:.4f}-{high:.4f}): {where}"
            )
        if not args.no_application:
            application(db, args, res)
        if args.full:
            full_builds(db, args, res)
        if args.groups:
            groups(db, args)
    finally:
        stop()


if __name__ == "__main__":
    main()
