"""Query vectors without judgements (``--sample-queries N [--seed S]``, ``--queries-sql``,
``--queries-file``): an index is measured against exact search, which needs query vectors only.

The vectors are stored as a *query set*: a row of pgeval.testset (``source_format`` 'queries',
``query_source`` = where they came from: source, seed, count, content hash) whose queries carry
their embedding and no judgement. Its name is ``queries-<content hash>``, so the same vectors are
the same query set (and its stored ground truth is reused); runs on other vectors never compare.

A sampled query is a row of the target (after its filters), one per chunk, drawn in the order of
``hashtextextended(chunk id, seed)`` (reproducible, and stable when rows are added elsewhere); its
query id is its chunk id, and that chunk is removed from every ranked list of the query
(``own_chunk_removed``): otherwise every query would find itself first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg import sql

from ..core.errors import InputError, NotFound, param
from ..core.ids import as_text, ident
from ..core.vector_literal import vector_literal

if TYPE_CHECKING:
    from ..core.db import Database

HASH_VERSION = b"pgeval-queries-v1\n"
SOURCE_FORMAT = "queries"

# what the queries behind a figure are (the JSON's "queries" beside it): rows of the table
# searched as nodes of the index they query, sampled rows left out of the copy an index was
# built on, the application's own (--captured), vectors that are no row of the table (a file's,
# --queries-sql's), a test set's
SAMPLED_ROWS = "sampled rows"
HELD_OUT_ROWS = "held-out rows"
CAPTURED = "captured queries"
QUERY_SET = "query set"
TEST_SET = "test set"
# the command that captures the application's own queries (docs/own-table.md)
CAPTURE = "pgeval queries capture --how"

# said beside every figure measured with sampled rows as nodes of the index they search: their
# recall is biased up against the application's queries, more on a larger table (issue 47:
# ef_search 11 read 0.9503 on sampled rows of a 200,000-row HNSW index, 0.875 on real queries)
SAMPLED_BIAS = (
    "note: measured on sampled rows of the table, not on the application's queries: each is a "
    "node of the index it queries (its own row taken out of its list), so its recall is an "
    "upper bound for the application's queries, the further above them the larger the table "
    "(0.9503 against 0.875 on one 200,000-row HNSW index, docs/own-table.md); the "
    "application's own queries measure what it gets: `" + CAPTURE + "` says how to log them "
    "(then --captured SET)"
)


def label(info: dict | None, held_out: bool = False) -> str:
    """What the queries of a measurement are (:data:`SAMPLED_ROWS`, ...): ``info`` the query
    source's record (None: a test set), ``held_out`` whether the index searched was built
    without the sampled rows."""
    if info is None:
        return TEST_SET
    if info.get("own_chunk_removed"):
        return HELD_OUT_ROWS if held_out else SAMPLED_ROWS
    return CAPTURED if info.get("source") == "captured" else QUERY_SET


def bounded(recall: float, k: int) -> str:
    """A sampled rows' figure as what it is: ``recall@10 ≤ 0.9503 for the application's queries
    (sampled rows: an upper bound)``."""
    return f"recall@{k} ≤ {recall:.4f} for the application's queries (sampled rows: an upper bound)"


@dataclass(frozen=True)
class QuerySource:
    kind: str  # sample | sql | file
    count: int | None = None  # sample: N
    seed: int = 0
    statement: str | None = None  # sql
    path: str | None = None  # file
    captured: str | None = None  # captured: the set's name (`pgeval queries capture`)
    window: str | None = None  # captured: the newest only (``1h``: sent within an hour of it)
    # captured, a group's: only queries whose filter on this column had this value
    where: tuple[str, str] | None = None
    # captured, one shape's only (captured/shapes.py: each shape measured as it was sent)
    shape: int | None = None


def in_words(info: dict | None, testset: str | None = None, *, detail: bool = False) -> str:
    """The queries a sweep, probe or stage report measured, in words, from their source record
    (:func:`materialize`'s): ``300 sampled rows``, with ``detail`` ``300 sampled rows (seed 0,
    own chunk removed)``; no record: ``test set NAME`` (or ``queries without judgements``)."""
    q = info or {}
    n, source = q.get("count"), q.get("source")
    short, more = {
        "sample": (f"{n} sampled rows", f" (seed {q.get('seed')}, own chunk removed)"),
        "sql": (f"{n} queries from SQL", " (--queries-sql)"),
        "file": (f"{n} queries from {q.get('file')}", ""),
        "captured": (f"{n} captured queries", f" (set {q.get('captured')})"),
    }.get(str(source), (f"test set {testset}" if testset else "queries without judgements", ""))
    return short + (more if detail else "")


def from_options(
    *,
    testset: str | None,
    sample: int | None,
    seed: int | None,
    queries_sql: str | None,
    queries_file: str | None,
    captured: str | None = None,
    window: str | None = None,
) -> QuerySource | None:
    """The query source the options name (None: ``--testset``); exactly one source is needed."""
    sources = {
        "testset": testset,
        "sample_queries": sample,
        "queries_sql": queries_sql,
        "queries_file": queries_file,
        "captured": captured,
    }
    given = [param(o) for o, v in sources.items() if v is not None]
    if len(given) != 1:
        raise InputError(
            f"give exactly one of {', '.join(map(param, sources))} "
            f"(got {', '.join(given) or 'none'})",
            field=param("testset"),
        )
    if window is not None and captured is None:
        raise InputError(f"{param('window')} goes with {param('captured')}", field=param("window"))
    if captured is not None:
        if window is not None:
            window_of(window)
        return QuerySource("captured", captured=captured, window=window)
    if seed is not None and sample is None:
        raise InputError(
            f"{param('seed')} goes with {param('sample_queries')}", field=param("seed")
        )
    if sample is not None:
        if sample < 1:
            raise InputError(
                f"{param('sample_queries')} must be >= 1, got {sample}",
                field=param("sample_queries"),
            )
        return QuerySource("sample", count=sample, seed=seed or 0)
    if queries_sql is not None:
        if not queries_sql.strip():
            raise InputError("the statement is empty", field=param("queries_sql"))
        return QuerySource("sql", statement=queries_sql)
    if queries_file is not None:
        return QuerySource("file", path=queries_file)
    return None


# ---- reading the vectors ---------------------------------------------------------------------


def _vector(value: object, where: str, field: str) -> np.ndarray:
    if value is None:
        raise InputError(f"{where}: the vector is NULL", field=field)
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    elif isinstance(value, str):
        value = value.strip().strip("[]{}").split(",")
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputError(f"{where}: not a vector of numbers", field=field) from None
    if vec.ndim != 1 or vec.size == 0:
        raise InputError(f"{where}: not a non-empty vector", field=field)
    if not np.all(np.isfinite(vec)):
        raise InputError(f"{where}: the vector has a NaN or infinite value", field=field)
    return vec


def sample(kb: Any, target: Any, count: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """``count`` distinct chunks of the target (its filters applied), one row each: the first
    chunks with a vector in the order of ``hashtextextended(chunk id, seed)``, then chunk id.

    Two statements, so that the cost does not grow with the vectors' size: the chunk ids in that
    order (no vector read: the planner may answer from the id's index alone), then the vectors of
    those ids only. A chunk whose rows all have a NULL vector is passed over, as before; when
    that leaves fewer than ``count``, a longer prefix of the order is read."""
    from ..core.vector_types import register_vector

    register_vector(kb)
    where, params = target.where()
    vec = target.vector_expr()
    cid = as_text(sql.Identifier(target.id_column))
    notnull = sql.SQL("{} {} IS NOT NULL AND {} = ANY(%s)").format(
        sql.SQL(" AND") if where.as_string(kb) else sql.SQL(" WHERE"), vec, cid
    )
    limit = count if target.unique_id else count * 4
    out: dict[str, np.ndarray] = {}
    while True:
        order = sql.SQL(
            "SELECT {cid} FROM {table}{where} ORDER BY hashtextextended({cid}, {seed}), 1 "
            "LIMIT {limit}"
        ).format(
            cid=cid,
            table=target.table_sql(),
            where=where,
            seed=sql.Literal(int(seed)),
            limit=sql.Literal(int(limit)),
        )
        ids = [r[0] for r in kb.execute(order, params).fetchall()]
        chunks = list(dict.fromkeys(ids))  # several rows of one chunk are adjacent
        vectors: dict[str, object] = {}
        if chunks:
            fetch = sql.SQL("SELECT {cid}, ({vec})::vector FROM {table}{where}{notnull}").format(
                cid=cid, vec=vec, table=target.table_sql(), where=where, notnull=notnull
            )
            for chunk, v in kb.execute(fetch, [*params, chunks]).fetchall():
                vectors.setdefault(chunk, v)  # a chunk's rows: keep one
        out = {}
        for chunk in chunks:
            if chunk in vectors:
                out[chunk] = _vector(vectors[chunk], f"chunk '{chunk}'", param("sample_queries"))
                if len(out) == count:
                    break
        if len(out) == count or len(ids) < limit:
            break
        limit *= 4
    kb.rollback()
    if len(out) < count:
        raise InputError(
            f"target '{target.name}' has {len(out)} chunks (after its filters), "
            f"fewer than the {count} asked for",
            field=param("sample_queries"),
        )
    return list(out.items())


def from_sql(kb: Any, statement: str) -> list[tuple[str, np.ndarray]]:
    """Rows (query_id, vector) of the user's statement, run READ ONLY on the knowledge base."""
    from ..core.errors import first_line
    from ..core.vector_types import register_vector

    register_vector(kb)
    try:
        kb.execute("SET TRANSACTION READ ONLY")
        cur = kb.execute(statement.encode())
        if cur.description is None or len(cur.description) < 2:
            raise InputError(
                "the statement must return two columns: query_id, vector",
                field=param("queries_sql"),
            )
        rows = cur.fetchall()
    except InputError:
        kb.rollback()
        raise
    except Exception as exc:
        kb.rollback()
        raise InputError(
            f"the statement failed: {first_line(exc)}", field=param("queries_sql")
        ) from None
    kb.rollback()
    # the option naming the source: queries_sql for "sql", ...; captured for "captured"
    field = param("queries_sql")
    return [
        (_id(r[0], f"row {i}", field), _vector(r[1], f"row {i}", field))
        for i, r in enumerate(rows, 1)
    ]


def window_of(text: str) -> str:
    """``--window`` checked (30min, 1h, 7d): the interval PostgreSQL reads."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|min|h|d)\s*", text)
    if m is None:
        raise InputError(f"'{text}' is not a window (e.g. 30min, 1h, 7d)", field=param("window"))
    unit = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days"}[m.group(2)]
    return f"{m.group(1)} {unit}"


def from_captured(conn: Any, src: QuerySource) -> list[tuple[str, np.ndarray]]:
    """The query vectors of a captured set (`pgeval queries capture`), in query id order: the
    newest only (``window``), a group's only (``where``: its shapes' filter on the column)."""
    row = conn.execute(
        "SELECT set_id FROM pgeval.captured_set WHERE name = %s", (src.captured,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no captured set '{src.captured}' (`pgeval queries list` lists them)")
    column, value = src.where or (None, None)
    got = conn.execute(
        "SELECT q.query_id, q.vector FROM pgeval.captured_query q "
        "JOIN pgeval.captured_shape s USING (set_id, shape) WHERE q.set_id = %(id)s "
        "AND (%(w)s::interval IS NULL OR q.last_seen >= (SELECT max(last_seen) "
        "  FROM pgeval.captured_query WHERE set_id = %(id)s) - %(w)s::interval) "
        "AND (%(col)s::text IS NULL OR q.params[(s.filters ->> %(col)s)::int - 1] = %(val)s) "
        "AND (%(shape)s::int IS NULL OR q.shape = %(shape)s) "
        'ORDER BY q.query_id COLLATE "C"',
        {
            "id": row[0],
            "w": None if src.window is None else window_of(src.window),
            "col": column,
            "val": value,
            "shape": src.shape,
        },
    ).fetchall()
    return [(qid, np.asarray(vec, dtype=np.float32)) for qid, vec in got]


def _query_id(value: object) -> str:
    """A query id by the one rule for ids (an integer read as its digits); ValueError else."""
    return ident(
        str(value) if isinstance(value, int) and not isinstance(value, bool) else value, "query id"
    )


def _id(value: object, where: str, field: str) -> str:
    try:
        return _query_id(value)
    except ValueError as exc:
        raise InputError(f"{where}: query id {exc}", field=field) from None


def _npy_rows(p: Path, path: str) -> list[tuple[str, np.ndarray]]:
    """A ``.npy`` matrix: query ids q1, q2, ... in row order."""
    try:
        m = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise InputError(f"not a .npy matrix ({exc})", file=path) from None
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
        raise InputError(
            f"a .npy query file must be a non-empty 2-d matrix, got shape {tuple(m.shape)}",
            file=path,
        )
    if not np.issubdtype(m.dtype, np.number):
        raise InputError(f"the matrix holds {m.dtype}, not numbers", file=path)
    return [(f"q{i}", _vector(row, f"{path}:row {i}", "embedding")) for i, row in enumerate(m, 1)]


def _jsonl_row(line: str, path: str, line_no: int) -> tuple[str, np.ndarray]:
    """One JSONL line {"id", "embedding"}."""
    bad = partial(InputError, file=path, line=line_no)  # an error naming this line
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise bad(f"not JSON ({exc.args[0]})") from None
    if not isinstance(obj, dict):
        raise bad("a line must be an object with id and embedding")
    for key in ("id", "embedding"):
        if key not in obj:
            raise bad("missing", field=key)
    try:
        qid = _query_id(obj["id"])
    except ValueError as exc:
        raise bad(str(exc), field="id") from None
    emb = obj["embedding"]
    if not isinstance(emb, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in emb
    ):
        raise bad("not a list of numbers", field="embedding")
    try:
        vec = _vector(emb, "vector", "embedding")
    except InputError as exc:
        raise bad(exc.detail.split(": ", 1)[-1], field="embedding") from None
    return qid, vec


def from_file(path: str) -> list[tuple[str, np.ndarray]]:
    """A ``.npy`` matrix (query ids q1, q2, ... in row order) or JSONL lines {"id", "embedding"}."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=path, field=param("queries_file"))
    if p.suffix.lower() == ".npy":
        return _npy_rows(p, path)
    out = []
    with p.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if line.strip():
                out.append(_jsonl_row(line, path, line_no))
    if not out:
        raise InputError("no query in the file", file=path)
    return out


def _check(
    rows: list[tuple[str, np.ndarray]], origin: str, field: str, dimension: int | None
) -> None:
    if not rows:
        raise InputError("no query vector", field=field)
    seen: set[str] = set()
    dim = rows[0][1].size
    for qid, vec in rows:
        if qid in seen:
            raise InputError(f"{origin}: query id '{qid}' appears twice", field=field)
        seen.add(qid)
        if vec.size != dim:
            raise InputError(
                f"{origin}: query '{qid}' has {vec.size} dimensions, the first query {dim}",
                field=field,
            )
    if dimension is not None and dim != dimension:
        raise InputError(
            f"{origin}: the query vectors have {dim} dimensions, the target searches {dimension}",
            field=field,
        )


def content_hash(rows: list[tuple[str, np.ndarray]], own_chunk_removed: bool) -> str:
    h = hashlib.sha256(HASH_VERSION)
    h.update(b"own\n" if own_chunk_removed else b"keep\n")
    for qid, vec in rows:
        h.update(qid.encode() + b"\0")
        h.update(np.ascontiguousarray(vec, dtype="<f4").tobytes())
    return h.hexdigest()


# ---- storing them --------------------------------------------------------------------------


def sample_record(count: int, digest: str, seed: Any, target: str) -> dict:
    """The record of a stored sample of ``target``'s rows, as :func:`materialize` records it
    (a probe's query set reused: tuning/watch/unchanged.py, tuning/sweep/remeasure.py)."""
    return {
        "source": "sample",
        "count": int(count),
        "content_hash": digest,
        "own_chunk_removed": True,
        "seed": seed,
        "target": target,
    }


def materialize(database: Database, src: QuerySource, target: Any) -> tuple[str, dict]:
    """Read the vectors, store them as a query set (unless stored already); return its name and
    the source record (source, seed, count, content hash) for the run's configuration."""
    field = param(
        {"sample": "sample_queries", "sql": "queries_sql", "file": "queries_file"}.get(
            src.kind, src.kind
        )
    )
    rows: list
    limits: list[int] = []
    if src.kind == "captured":
        with database.connect() as conn:
            rows = from_captured(conn, src)
            limits = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT s.k FROM pgeval.captured_shape s JOIN pgeval.captured_set c "
                    "USING (set_id) WHERE c.name = %s AND s.k IS NOT NULL "
                    "AND (%s::int IS NULL OR s.shape = %s) ORDER BY 1",
                    (src.captured, src.shape, src.shape),
                )
            ]
        if not rows:
            raise InputError(
                f"captured set '{src.captured}' has no query "
                + (f"with {src.where[0]} = {src.where[1]} " if src.where else "")
                + (f"sent within {src.window} of its newest" if src.window else ""),
                field=field,
            )
        origin = f"captured set '{src.captured}'"
    elif src.kind == "file":
        assert src.path is not None
        rows = from_file(src.path)
        origin = str(src.path)
    else:
        with database.connect(results=False, read_only=True) as kb:
            rows = (
                sample(kb, target, src.count or 0, src.seed or 0)
                if src.kind == "sample"
                else from_sql(kb, src.statement or "")
            )
        origin = field
    _check(rows, origin, field, target.dimension if target is not None else None)
    own = src.kind == "sample"
    digest = content_hash(rows, own)
    if own:  # recorded as a probe records the sample it reuses
        info = sample_record(len(rows), digest, src.seed, target.name)
    else:
        info = {
            "source": src.kind,
            "count": len(rows),
            "content_hash": digest,
            "own_chunk_removed": False,
        }
    if src.kind == "sql":
        info["sql"] = src.statement
    elif src.kind == "captured":
        info.update(captured=src.captured, window=src.window, limits=limits)
        if src.where:
            info["where"] = list(src.where)
        if src.shape is not None:
            info["shape"] = src.shape
    elif src.kind == "file":
        info["file"] = str(Path(src.path or "").resolve())
    name = f"queries-{digest[:16]}"
    with database.connect() as conn:
        from ..core.install import ensure_installed

        ensure_installed(conn)
        with conn.transaction():
            from .catalog import find_testset, lock_name

            lock_name(conn, name)

            found = find_testset(conn, name)
            row = None if found is None else (found[1],)
            if row is None:
                tid = conn.execute(
                    "INSERT INTO pgeval.testset (name, content_hash, source_format, source_file, "
                    "n_queries, query_source) VALUES (%s, %s, %s, %s, %s, %s) "
                    "RETURNING testset_id",
                    (name, digest, SOURCE_FORMAT, info.get("file"), len(rows), json.dumps(info)),
                ).fetchone()[0]
                with conn.cursor().copy(
                    "COPY pgeval.query (testset_id, query_id, position, embedding) FROM STDIN"
                ) as copy:
                    for pos, (qid, vec) in enumerate(rows, 1):
                        copy.write_row((tid, qid, pos, vector_literal(vec)))
            elif row[0] != digest:  # 64 bits of sha256 alike, content not: refuse
                raise InputError(f"query set '{name}' exists with other content", field=field)
    return name, info
