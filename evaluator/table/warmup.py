"""`pgeval warmup`: bring the target's table and indexes into shared buffers before any timing.

Method: ``pg_prewarm`` of the table and its ANN indexes where that extension is installed (it is
not on the embedded server; nothing is ever installed into the user's database); then warm-up
passes of the test set's query vectors (or seeded random vectors of the target's dimension)
through the same statement a vector stage runs, until the median latency of two consecutive
passes differs by less than ``tolerance`` (5 %), within ``max_passes``.

Buffer use is read from ``pg_statio_user_tables`` / ``pg_statio_user_indexes`` before, after and
after each pass: blocks found in shared buffers (hits) against blocks read from the OS (reads).
An ANN index larger than shared_buffers can never be fully cached: a warning says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, NotFound, param
from ..core.percentile import nearest_rank

if TYPE_CHECKING:  # numpy and the server's health checks load when a warm-up runs, not for --help
    import numpy as np

MAX_PASSES = 10
TOLERANCE = 0.05
RANDOM_QUERIES = 64


@dataclass
class PassStats:
    n: int
    median_ms: float
    p95_ms: float
    blocks_hit: int
    blocks_read: int
    index: str | None = None  # the ANN index this pass warmed (None: the table only)

    def as_dict(self) -> dict:
        return {
            "pass": self.n,
            "index": self.index,
            "median_ms": self.median_ms,
            "p95_ms": self.p95_ms,
            "blocks_hit": self.blocks_hit,
            "blocks_read": self.blocks_read,
        }


@dataclass
class WarmupReport:
    target: str
    method: str
    source: str  # where the query vectors came from
    queries: int
    converged: bool
    passes: list[PassStats] = field(default_factory=list)
    before: dict[str, dict] = field(default_factory=dict)  # relation -> {hit, read}
    after: dict[str, dict] = field(default_factory=dict)
    prewarmed: dict[str, int] = field(default_factory=dict)  # relation -> blocks loaded
    plan: str = ""  # what the planner chose for the statement, in words
    warnings: list[str] = field(default_factory=list)
    # per ANN index warmed: {"index", "kind", "plan", "settings" (forcing it), "passes",
    # "converged", "median_ms"}; an index the planner would not use: {"index", "kind", "skipped"}
    indexes: list[dict] = field(default_factory=list)

    def relations(self) -> list[dict]:
        rows = []
        for rel in self.after:
            b, a = self.before.get(rel, {"hit": 0, "read": 0}), self.after[rel]
            hit, read = a["hit"] - b["hit"], a["read"] - b["read"]
            rows.append(
                {
                    "relation": rel,
                    "kind": a["kind"],
                    "hit_before": b["hit"],
                    "read_before": b["read"],
                    "hit_after": a["hit"],
                    "read_after": a["read"],
                    "hit_during": hit,
                    "read_during": read,
                    "hit_ratio_during": hit / (hit + read) if hit + read else None,
                }
            )
        return rows

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "method": self.method,
            "source": self.source,
            "queries": self.queries,
            "converged": self.converged,
            "plan": self.plan,
            "passes": [p.as_dict() for p in self.passes],
            "prewarmed": self.prewarmed,
            "relations": self.relations(),
            "indexes": self.indexes,
            "warnings": self.warnings,
        }


def statio(conn: Any, table_oid: int) -> dict[str, dict]:
    """Cumulative buffer hits and reads of the table (heap) and each of its indexes."""
    if conn.execute("SELECT current_setting('server_version_num')::int >= 150000").fetchone()[0]:
        conn.execute("SELECT pg_stat_force_next_flush()")  # this backend's pending counters
    conn.execute("SELECT pg_stat_clear_snapshot()")
    out = {}
    row = conn.execute(
        "SELECT relname, coalesce(heap_blks_hit, 0), coalesce(heap_blks_read, 0) "
        "FROM pg_statio_user_tables WHERE relid = %s",
        (table_oid,),
    ).fetchone()
    if row:
        out[row[0]] = {"kind": "table", "hit": int(row[1]), "read": int(row[2])}
    for name, hit, read in conn.execute(
        "SELECT indexrelname, coalesce(idx_blks_hit, 0), coalesce(idx_blks_read, 0) "
        "FROM pg_statio_user_indexes WHERE relid = %s ORDER BY 1",
        (table_oid,),
    ).fetchall():
        out[name] = {"kind": "index", "hit": int(hit), "read": int(read)}
    return out


def _totals(stats: dict[str, dict]) -> tuple[int, int]:
    return sum(s["hit"] for s in stats.values()), sum(s["read"] for s in stats.values())


def extension_state(conn: Any, name: str) -> str:
    """``created`` (in this database), ``available`` (the server has it: CREATE EXTENSION would
    work for a user allowed to) or ``missing`` (not on this server at all)."""
    created, available = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = %s), "
        "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = %s)",
        (name, name),
    ).fetchone()
    return "created" if created else "available" if available else "missing"


def prewarm_method(state: str) -> str:
    """How the cache is warmed, saying what to do when pg_prewarm could be used but is not."""
    if state == "created":
        return "pg_prewarm, then query passes"
    if state == "available":
        return (
            "query passes (pg_prewarm is available on this server but not created in this "
            "database: run `CREATE EXTENSION pg_prewarm;` as a superuser to use it)"
        )
    return (
        "query passes (pg_prewarm is not installed: this server does not have it; it comes "
        "with PostgreSQL's contrib modules)"
    )


def prewarm(conn: Any, table_oid: int) -> dict[str, int]:
    """pg_prewarm the table and its ANN indexes: {relation: blocks loaded}."""
    from psycopg import sql

    from ..targets import introspect
    from .health import extension_fn

    fn = extension_fn(conn, "pg_prewarm", "pg_prewarm")

    table = conn.execute("SELECT %s::oid::regclass::text", (table_oid,)).fetchone()[0]
    rels = [(table, table_oid)] + [
        (name, oid) for name, _, oid, _ in introspect.ann_indexes(conn, table_oid)
    ]
    return {
        name: int(
            conn.execute(sql.SQL("SELECT {}(%s::oid::regclass)").format(fn), (oid,)).fetchone()[0]
        )
        for name, oid in rels
    }


def random_vectors(dim: int, n: int = RANDOM_QUERIES, seed: int = 0) -> list[np.ndarray]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [v.astype(np.float32) for v in rng.normal(size=(n, dim))]


def testset_vectors(results_conn: Any, testset: str, embedder: str | None) -> tuple[list, str]:
    """The test set's query embeddings (under ``embedder``, or the only label stored)."""
    from ..providers.embedders import storage

    tid = storage.testset_id(results_conn, testset)
    if embedder is None:
        labels = [r["embedder"] for r in storage.list_embeddings(results_conn, testset)]
        if len(labels) > 1:
            raise InputError(
                f"test set '{testset}' has embeddings from several embedders "
                f"({', '.join(labels)}): choose one",
                field=param("embedder"),
            )
        if not labels:
            queries = storage.testset_queries(results_conn, tid, with_embedding=True)
            vecs = [q.embedding for q in queries if q.embedding is not None]
            if not vecs:
                raise NotFound(
                    f"test set '{testset}' has no query embeddings (run `pgeval "
                    f"embed` first, or warm up with random vectors: omit {param('testset')})"
                )
            return vecs, f"test set {testset} (embeddings from the file)"
        embedder = labels[0]
    return (
        [q.embedding for q in storage.load(results_conn, tid, embedder)],
        f"test set {testset} (embedder {embedder})",
    )


def describe_plan(kb: Any, stmt: Any, params: dict, table_oid: int, settings: dict | None) -> str:
    """What the planner chooses for the stage statement under ``settings``, in words."""
    from ..stages import gucs, plan_check

    with kb.transaction(force_rollback=True):
        gucs.apply_local(kb, settings or {})
        plan = plan_check.explain(kb, stmt, params)
        return plan_check.describe(plan, plan_check.ann_indexes(kb, table_oid))


def one_pass(kb: Any, text: str, params: dict, vectors: Any, progress: Any = None) -> list[float]:
    """Run every vector once through the stage statement; latencies in ms (client round trip)."""
    import numpy as np

    cur = kb.cursor()
    out = []
    for v in vectors:
        t0 = time.perf_counter()
        cur.execute(text, dict(params, q=np.asarray(v, dtype=np.float32)), prepare=True)
        cur.fetchall()
        out.append((time.perf_counter() - t0) * 1000.0)
        if progress:
            progress()
    return out


def warmup(
    kb: Any,
    target: Any,
    vectors: Any,
    *,
    source: str,
    settings: dict | None = None,
    k: int = 10,
    max_passes: int = MAX_PASSES,
    tolerance: float = TOLERANCE,
    use_prewarm: bool = True,
    on_pass: Any = None,
    progress: Any = None,
    index: str | None = None,
) -> WarmupReport:
    """Warm ``target`` up with ``vectors``; ``kb`` is an autocommit connection to the knowledge
    base. Each ANN index of the target's vector column is warmed through the statement of the
    stage kind it serves (one of kinds.registry's ANN kinds), or only ``index``;
    each pass runs in a READ ONLY transaction with ``settings`` applied (SET LOCAL)."""
    from ..core.vector_types import register_vector
    from ..stages import gucs
    from .target_table import resolve_table

    if max_passes < 2:
        raise InputError(
            f"{param('max_passes')} must be at least 2 (two passes are compared)",
            field=param("max_passes"),
        )
    if not vectors:
        raise InputError("no query vectors to warm up with", field=param("testset"))
    if target.dimension and len(vectors[0]) != target.dimension:
        raise InputError(
            f"query vectors have dimension {len(vectors[0])} but target "
            f"'{target.name}' searches dimension {target.dimension}",
            field=param("embedder"),
        )
    register_vector(kb)
    gucs.load_libraries(kb)
    oid = resolve_table(kb, target)
    report = WarmupReport(
        target=target.name,
        method="query passes",
        source=source,
        queries=len(vectors),
        converged=False,
    )
    from . import health

    limit = health.shared_buffers_bytes(kb)
    for name, _, size in health.ann_index_sizes(kb, oid):
        if size > limit:
            report.warnings.append(
                f"index {name} ({size // 1048576} MB) is larger than "
                f"shared_buffers ({limit // 1048576} MB): it cannot stay "
                "cached; latencies will include reads from the OS cache/disk"
            )
    report.before = statio(kb, oid)
    state = extension_state(kb, "pg_prewarm") if use_prewarm else None
    if state == "created":
        report.prewarmed = prewarm(kb, oid)
    if state:
        report.method = prewarm_method(state)
    paths = index_paths(kb, target, index)
    for name, kind, searched in paths:
        _warm_path(
            kb, report, oid, (name, kind, searched), vectors, settings or {}, k,
            (max_passes, tolerance), on_pass, progress,
        )  # fmt: skip
    report.converged = bool(report.passes) and all(
        i.get("converged") for i in report.indexes if "skipped" not in i
    )
    report.after = statio(kb, oid)
    return report


def index_paths(kb: Any, target: Any, only: str | None = None) -> list[tuple[Any, Any, Any]]:
    """``(index name, stage kind, the target as that kind searches it)`` for each ANN index of
    the target's vector column (the kind's access method and operator class: the catalog's
    one rule), in the registry's order; ``only``: that index. No ANN index: ``[(None, None,
    target)]`` (the table is warmed through the exact statement)."""
    from dataclasses import replace

    from ..kinds import registry
    from ..targets.catalog import vector_indexes

    out: list[tuple[Any, Any, Any]] = []
    for kind_name in registry.ann_kinds():
        kind = registry.KINDS[kind_name]
        if kind.index_method is None:
            continue
        searched = target
        if kind.cast_type and target.dimension:
            searched = replace(target, search_type=kind.cast_type)
        elif kind.cast_type:
            continue  # a cast needs a fixed dimension
        for found in vector_indexes(kb, searched, (kind.index_method,)):
            if found["name"] not in {n for n, _, _ in out}:
                out.append((found["name"], kind_name, searched))
    kb.rollback()
    if only is not None:
        picked = [p for p in out if p[0] == only]
        if not picked:
            raise InputError(
                f"'{only}' is not an ANN index of {target.qualified()}.{target.vector_column} "
                f"(its ANN indexes: {', '.join(n for n, _, _ in out) or 'none'})",
                field=param("index"),
            )
        return picked
    return out or [(None, None, target)]


def _forcing(kb: Any, stmt: Any, params: dict, name: str, settings: dict) -> dict | None:
    """Settings under which the planner serves ``stmt`` with index ``name`` ({} when it does
    already, or uses no index at all: only the table is warmed, with a warning); None when
    another ANN index serves the statement and no setting tried changes that."""
    from ..core.errors import PlanError
    from ..stages import gucs, plan_check

    def uses(plan: dict) -> str:
        if name not in [s[1] for s in plan_check.index_scans(plan)]:
            raise PlanError(f"not {name}")
        return name

    with kb.transaction(force_rollback=True):
        gucs.apply_local(kb, settings)
        plan = plan_check.explain(kb, stmt, params)
        if not plan_check.index_scans(plan):
            return {}  # no index at all (a small table): warmed as it is, and said so
        try:
            uses(plan)
            return {}
        except PlanError:
            pass
        found = plan_check.find_forcing(kb, stmt, params, uses, settings)
    return None if found is None else dict(found[0])


def _warm_path(
    kb: Any,
    report: WarmupReport,
    oid: int,
    path: tuple[Any, Any, Any],
    vectors: Any,
    settings: dict,
    k: int,
    limits: tuple[int, float],
    on_pass: Any,
    progress: Any,
) -> None:
    """Warm one index (``path``: its name, None for the table alone; its kind; the target as
    the kind searches it) through its kind's statement, until the median of two passes settles
    (``limits``: max passes, tolerance); what happened goes into ``report``."""
    import numpy as np

    from ..stages import gucs, vector_sql

    name, kind, searched = path
    max_passes, tolerance = limits

    stmt, params, _ = vector_sql.per_query(searched, k)
    first = dict(params, q=np.asarray(vectors[0], np.float32))
    entry: dict[str, Any] = {"index": name, "kind": kind}
    if name is not None:
        forced = _forcing(kb, stmt, first, name, settings)
        if forced is None:
            plan = describe_plan(kb, stmt, first, oid, settings)
            entry["skipped"] = f"the planner serves its {kind} statement with {plan}"
            report.indexes.append(entry)
            report.warnings.append(
                f"index {name} ({kind}) was not warmed: {entry['skipped']}, and no planner "
                "setting tried changes that (warm it with --index after dropping the other, or "
                "measure it with sweep --isolate-index)"
            )
            return
        settings = {**settings, **forced}
        entry["settings"] = forced
    plan = describe_plan(kb, stmt, first, oid, settings)
    entry["plan"] = plan
    report.plan = plan if not report.plan else f"{report.plan}; {plan}"
    if "sequential scan" in plan or "without an index scan" in plan:
        report.warnings.append(
            f"the planner answers these queries with {plan}, not an "
            "ANN index: only the table is warmed (small table? try --set "
            "enable_seqscan=off, as the stage would need too)"
        )
    text = stmt.as_string(kb)
    last = statio(kb, oid)
    medians: list[float] = []
    converged = False
    for n in range(1, max_passes + 1):
        with kb.transaction():
            kb.execute("SET TRANSACTION READ ONLY")
            gucs.apply_local(kb, settings)
            lat = one_pass(kb, text, params, vectors, progress)
        now = statio(kb, oid)
        (h1, r1), (h0, r0) = _totals(now), _totals(last)
        last = now
        # nearest rank, the one percentile rule (the median too: never a mean of two)
        stats = PassStats(
            n,
            nearest_rank(lat, 0.5) or 0.0,
            nearest_rank(lat, 0.95) or 0.0,
            h1 - h0,
            r1 - r0,
            index=name,
        )
        report.passes.append(stats)
        if on_pass:
            on_pass(stats)
        medians.append(stats.median_ms)
        if n >= 2 and medians[-2] > 0 and abs(medians[-1] - medians[-2]) / medians[-2] < tolerance:
            converged = True
            break
    entry.update(passes=len(medians), converged=converged, median_ms=medians[-1])
    report.indexes.append(entry)
    if not converged:
        report.warnings.append(
            f"median latency{'' if name is None else f' through index {name}'} did not settle "
            f"within {max_passes} passes (last two: {medians[-2]:.3f} / {medians[-1]:.3f} ms): "
            "the machine is busy or the data does not fit in memory"
        )
