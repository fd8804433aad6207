"""A short health check of a target before anything is measured (`pgeval health`,
`pgeval fingerprint --check`).

Each check returns a :class:`Finding` (``ok``, ``hint``, ``warning`` or ``error``) with a count and up to
five example chunk ids. Checks read the knowledge base only (one scan per check, filter applied):

- ``null_vectors``: rows whose vector is NULL (never indexed, never retrieved);
- ``zero_vectors``: rows whose vector has norm 0 (cosine distance is undefined: NaN; HNSW with a
  cosine operator class does not index them);
- ``duplicate_vectors``: identical vectors under different chunk ids (ties: ranks become
  arbitrary between them);
- ``dimensions``: vectors whose dimension differs from the column's, the test set's embeddings'
  or the target's declared dimension;
- ``missing_judged``: judged chunk ids of the test set that the target does not hold (their recall
  can never be reached: a stale test set, or the wrong filter);
- ``server_version``: PostgreSQL older than :data:`MIN_SERVER_VERSION` (14) is not supported;
- ``vulnerable_extensions``: installed extension versions with a known advisory;
- ``keyword_index``: for a target with a text column, the index a keyword stage would use: a
  pg_textsearch bm25 index (BM25), else a GIN index on ``to_tsvector('config', column)`` (the
  ts_rank_cd fallback, not BM25); without either, the exact CREATE INDEX to run;
- ``invalid_indexes``: indexes left invalid by a failed ``CREATE INDEX CONCURRENTLY``;
- ``index_vs_shared_buffers``: ANN indexes larger than shared_buffers (every scan reads from the
  OS cache or disk: latency is then a property of the disk, not of the index settings).
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from ..core.ids import as_text
from ..targets import introspect
from . import target_table
from .finding import Finding
from .health_server import (  # noqa: F401  (re-exported: pgeval health's checks in one place)
    ADVISORIES,
    MIN_SERVER_VERSION,
    advisories,
    check_extensions,
    check_server_version,
    version_tuple,
)

EXAMPLES = 5


def extension_fn(conn: Any, name: str, extension: str = "vector") -> sql.Composable:
    """Function ``name`` of ``extension``, qualified by the schema it is installed in."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
        "ON n.oid = e.extnamespace WHERE e.extname = %s",
        (extension,),
    ).fetchone()
    return sql.Identifier(row[0], name) if row else sql.Identifier(name)


class _Target:
    """The target's table, columns and filters as SQL pieces."""

    def __init__(self, conn: Any, target: Any) -> None:
        self.target = target
        self.oid = target_table.resolve_table(conn, target)
        self.table = target.table_sql()
        self.id = sql.Identifier(target.id_column)
        self.vec = sql.Identifier(target.vector_column)  # stored vectors, never cast (a cast
        # of a vector of another dimension would fail: the dimension check reports those)
        self.column = target_table.vector_column(conn, self.oid, target.vector_column)
        self.base_type = target.vector_type

    def and_(self, cond: sql.Composable) -> tuple[sql.Composable, list]:
        return target_table.and_where(self.target, cond)


def _examples(conn: Any, t: _Target, cond: sql.Composable) -> tuple[int, list[str]]:
    where, params = t.and_(cond)
    n = conn.execute(
        sql.SQL("SELECT count(*) FROM {}{}").format(t.table, where), params
    ).fetchone()[0]
    ex = []
    if n:
        ex = [
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT DISTINCT {} FROM {}{} ORDER BY 1 LIMIT {}").format(
                    as_text(t.id), t.table, where, sql.Literal(EXAMPLES)
                ),
                params,
            ).fetchall()
        ]
    return int(n), ex


def _warning_if(n: int, check: str, said: str, ok: str, examples: list) -> Finding:
    """A ``warning`` counting ``n`` things found (``said``), else ``ok`` (nothing found)."""
    return Finding(check, "warning" if n else "ok", n, said if n else ok, examples)


def check_null(conn: Any, t: _Target) -> Finding:
    n, ex = _examples(conn, t, sql.SQL("{} IS NULL").format(t.vec))
    said = f"{n} row(s) with a NULL vector: never indexed, never retrieved"
    return _warning_if(n, "null_vectors", said, "no NULL vector", ex)


def check_zero(conn: Any, t: _Target) -> Finding:
    fn = "vector_norm" if t.base_type == "vector" else "l2_norm"
    n, ex = _examples(conn, t, sql.SQL("{}({}) = 0").format(extension_fn(conn, fn), t.vec))
    if not n:
        return Finding("zero_vectors", "ok", 0, "no zero vector")
    if t.target.distance != "cosine":
        return Finding(
            "zero_vectors",
            "ok",
            n,
            f"{n} zero vector(s): harmless for distance {t.target.distance}",
            ex,
        )
    return Finding(
        "zero_vectors",
        "warning",
        n,
        f"{n} zero vector(s): cosine distance is NaN and HNSW/DiskANN with a cosine "
        "operator class leave them out",
        ex,
    )


def check_duplicates(conn: Any, t: _Target) -> Finding:
    send = sql.SQL(t.column["send"])
    where, params = t.and_(sql.SQL("{} IS NOT NULL").format(t.vec))
    q = sql.SQL(
        "SELECT count(*), coalesce(sum(n), 0), (array_agg(ids ORDER BY ids))[1:{}] "
        "FROM (SELECT count(DISTINCT {id}) AS n, "
        "array_to_string((array_agg(DISTINCT {idt}))[1:3], '=') AS ids "
        "FROM {table}{where} GROUP BY md5({send}({vec})) "
        "HAVING count(DISTINCT {id}) > 1) d"
    ).format(
        sql.Literal(EXAMPLES),
        id=t.id,
        idt=as_text(t.id),
        table=t.table,
        where=where,
        send=send,
        vec=t.vec,
    )
    groups, rows, ex = conn.execute(q, params).fetchone()
    groups = int(groups)
    return Finding(
        "duplicate_vectors",
        "warning" if groups else "ok",
        int(rows),
        f"{groups} vectors are shared by {int(rows)} different chunk ids: their ranks "
        "are decided by the tie-break, not by similarity"
        if groups
        else "no vector is shared by two chunk ids",
        list(ex or []),
    )


def check_dimensions(conn: Any, t: _Target, expected: dict[str, int | None]) -> Finding:
    col = t.vec
    where, params = t.and_(sql.SQL("{} IS NOT NULL").format(col))
    dims = conn.execute(
        sql.SQL("SELECT {}({}) AS d, count(*) FROM {}{} GROUP BY 1 ORDER BY 2 DESC").format(
            extension_fn(conn, "vector_dims"), col, t.table, where
        ),
        params,
    ).fetchall()
    found = {int(d): int(n) for d, n in dims}
    wanted = {int(v) for v in expected.values() if v}
    if len(wanted) > 1:
        return Finding(
            "dimensions",
            "error",
            0,
            "the expected dimensions disagree: "
            + ", ".join(f"{k} {v}" for k, v in expected.items() if v),
        )
    if wanted:
        want = wanted.pop()
        bad = {d: n for d, n in found.items() if d != want}
        if bad:
            n = sum(bad.values())
            _, ex = _examples(
                conn,
                t,
                sql.SQL("{}({}) <> {}").format(
                    extension_fn(conn, "vector_dims"), col, sql.Literal(want)
                ),
            )
            return Finding(
                "dimensions",
                "error",
                n,
                f"{n} vector(s) do not have dimension {want} ("
                + ", ".join(f"dimension {d}: {c} row(s)" for d, c in sorted(bad.items()))
                + f"; expected from {', '.join(k for k, v in expected.items() if v)})",
                ex,
            )
        return Finding("dimensions", "ok", 0, f"every vector has dimension {want}")
    if len(found) > 1:
        return Finding(
            "dimensions",
            "warning",
            0,
            "mixed dimensions in one column: "
            + ", ".join(f"{d}: {c} rows" for d, c in sorted(found.items()))
            + " (each needs a partial index and a query cast to its dimension)",
        )
    return Finding(
        "dimensions",
        "ok",
        0,
        "one dimension: " + ", ".join(map(str, found)) if found else "no vector",
    )


def check_missing_judged(conn: Any, t: _Target, judged: list[str], relevant: set[str]) -> Finding:
    if not judged:
        return Finding("missing_judged", "ok", 0, "no judged chunk in the test set")
    where, params = t.and_(sql.SQL("{} = ANY(%s)").format(as_text(t.id)))
    present = {
        r[0]
        for r in conn.execute(
            sql.SQL("SELECT DISTINCT {} FROM {}{}").format(as_text(t.id), t.table, where),
            [*params, judged],
        ).fetchall()
    }
    missing = sorted(set(judged) - present)
    missing_rel = [c for c in missing if c in relevant]
    if not missing:
        return Finding(
            "missing_judged", "ok", 0, f"all {len(judged)} judged chunk ids are in the target"
        )
    return Finding(
        "missing_judged",
        "error" if missing_rel else "warning",
        len(missing),
        f"{len(missing)} of {len(judged)} judged chunk ids are not in the target "
        f"({len(missing_rel)} of them relevant: recall can never reach 1)",
        (missing_rel or missing)[:EXAMPLES],
    )


def shared_buffers_bytes(conn: Any) -> int:
    return int(
        conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0]
    )


def ann_index_sizes(conn: Any, table_oid: int) -> list[tuple[str, str, int]]:
    """[(index name, method, bytes)] of the table's ANN indexes."""
    return [(n, m, b) for n, m, _, b in introspect.ann_indexes(conn, table_oid)]


def check_index_size(conn: Any, t: _Target, limit: int | None = None) -> Finding:
    """ANN indexes larger than ``limit`` bytes (default: shared_buffers)."""
    limit = shared_buffers_bytes(conn) if limit is None else limit
    big = [(n, b) for n, _, b in ann_index_sizes(conn, t.oid) if b > limit]
    if not big:
        return Finding(
            "index_vs_shared_buffers",
            "ok",
            0,
            f"every ANN index fits in shared_buffers ({_size(limit)})",
        )
    return Finding(
        "index_vs_shared_buffers",
        "warning",
        len(big),
        "; ".join(
            f"index {n} ({_size(b)}) is larger than shared_buffers ({_size(limit)}): latency will "
            "measure the disk and the OS cache, not only the index"
            for n, b in big
        ),
        [n for n, _ in big],
    )


def check_change_log(conn: Any, t: _Target) -> Finding | None:
    """Whether the table's writes are counted (`pgeval target track`): without it, every probe,
    sweep and run reads every row version of the table to know the data is unchanged."""
    from . import change_log

    state = change_log.state(conn, t.oid)
    if state is not None:
        return Finding(
            "change_log",
            "ok",
            0,
            f"tracked ({change_log.count(state):,} write statements counted): probes, sweeps "
            "and runs know the data is unchanged without reading the table",
        )
    kind, size = conn.execute(
        "SELECT relkind::text, pg_relation_size(oid) FROM pg_class WHERE oid = %s", (t.oid,)
    ).fetchone()
    if kind != "r":
        return None  # views and partitioned tables: nothing to track
    return Finding(
        "change_log",
        "hint",
        1,
        f"not tracked: every probe, sweep and run reads the table's row versions ({_size(size)}) "
        "to know its data is unchanged; `pgeval target track "
        f"{t.target.name}` (as the table's owner) counts its writes instead",
    )


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.0f} {unit}"
        n /= 1024
    return str(n)


def check_keyword_index(conn: Any, t: _Target) -> Finding | None:
    """What a keyword (bm25) stage with default options would rank with, and over which index."""
    from ..stages import bm25_sql

    column = t.target.text_column
    if not column:
        return None
    if conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_textsearch')"
    ).fetchone()[0]:
        bm25 = bm25_sql.bm25_indexes(conn, t.oid, column)
        if bm25:
            return Finding(
                "keyword_index",
                "ok",
                0,
                f"bm25 index {bm25[0]['name']} on {column}: "
                "the keyword stage ranks with BM25 (pg_textsearch)",
            )
    config = conn.execute("SELECT current_setting('default_text_search_config')").fetchone()[0]
    config = conn.execute("SELECT %s::regconfig::text", (config,)).fetchone()[0]
    gin = bm25_sql.fts_indexes(conn, t.oid, column)
    fallback = (
        "no pg_textsearch bm25 index on " + column + ": the keyword stage ranks with "
        "PostgreSQL full-text search (ts_rank_cd fallback, not BM25)"
    )
    if gin:
        return Finding(
            "keyword_index",
            "ok",
            0,
            f"{fallback} over GIN index {gin[0]['name']} "
            f"(to_tsvector('{gin[0]['text_config']}', {column}))",
        )
    return Finding(
        "keyword_index",
        "hint",
        1,
        f"{fallback}, and no GIN index on "
        f"to_tsvector('{config}', {column}): every query scans the whole table; "
        f"create one: {bm25_sql.fts_index_sql(t.target, column, None, config, conn)}",
    )


def check_invalid(conn: Any, t: _Target) -> Finding:
    bad = introspect.invalid_indexes(conn, t.oid)
    said = f"invalid indexes (never used by the planner): {', '.join(bad)}"
    return _warning_if(len(bad), "invalid_indexes", said, "no invalid index", bad[:EXAMPLES])


def testset_judgements(results_conn: Any, testset: str, embedder: str | None = None) -> Any:
    """(judged chunk ids, relevant chunk ids, embedding dimension or None) of a test set."""
    from ..testset.catalog import resolve_testset

    tid, _ = resolve_testset(results_conn, testset)
    rows = results_conn.execute(
        "SELECT DISTINCT chunk_id, grade > 0 FROM pgeval.qrel WHERE testset_id = %s", (tid,)
    ).fetchall()
    judged = sorted({c for c, _ in rows})
    relevant = {c for c, rel in rows if rel}
    dim = results_conn.execute(
        "SELECT max(dim) FROM pgeval.query_embedding WHERE testset_id = %s "
        "AND (%s::text IS NULL OR embedder = %s)",
        (tid, embedder, embedder),
    ).fetchone()[0]
    if dim is None:
        dim = results_conn.execute(
            "SELECT max(vector_dims(embedding)) FROM pgeval.query "
            "WHERE testset_id = %s AND embedding IS NOT NULL",
            (tid,),
        ).fetchone()[0]
    return judged, relevant, dim


def check(
    kb_conn: Any,
    target: Any,
    *,
    results_conn: Any = None,
    testset: str | None = None,
    embedder: str | None = None,
    dimension: int | None = None,
) -> list[Finding]:
    """Every check on ``target`` (and ``testset``'s judgements when given)."""
    t = _Target(kb_conn, target)
    findings = [check_server_version(kb_conn), check_extensions(kb_conn)]
    judged, relevant, ts_dim = [], set(), None
    if testset:
        judged, relevant, ts_dim = testset_judgements(results_conn or kb_conn, testset, embedder)
    expected = {
        "column type": t.column.get("dimension"),
        "test set embeddings": ts_dim,
        "target definition": dimension or target.dimension,
    }
    findings += [
        check_null(kb_conn, t),
        check_zero(kb_conn, t),
        check_duplicates(kb_conn, t),
        check_dimensions(kb_conn, t, expected),
    ]
    if testset:
        findings.append(check_missing_judged(kb_conn, t, judged, relevant))
    keyword = check_keyword_index(kb_conn, t)
    findings += [
        f
        for f in (
            keyword,
            check_invalid(kb_conn, t),
            check_index_size(kb_conn, t),
            check_change_log(kb_conn, t),
        )
        if f is not None
    ]
    return findings
