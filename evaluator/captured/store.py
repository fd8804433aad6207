"""A captured set: read from logs (:func:`capture`), kept in ``pgeval.captured_*``, listed, shown,
deleted, exported, and read back as query vectors (:func:`vectors`).

A search is one execution the server logged: the ``execute`` line of a prepared statement (its
``bind`` and ``parse`` lines are the same execution, never counted) or a ``statement`` line.
Equal searches (shape, vector and values) are one query, sent as often as the log says. Each
query's id is a digest of what it sent, so appending a newer log adds to the counts of the
queries seen before and a query keeps its id.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.canonical import sha256_hex
from ..core.errors import Conflict, InputError, NotFound, param
from . import log_entries, searches

if TYPE_CHECKING:
    from ..core.db import Database
    from ..targets.targets import Target

_STATEMENT = re.compile(
    r"^(?:duration: [\d.]+ ms\s+)?(?P<kind>statement|execute|bind|parse)"
    r"(?: (?P<name>[^:]*))?: (?P<text>.*)$",
    re.DOTALL,
)
# said by `queries capture --how`: the settings that put the application's searches in the log
HOW = """\
-- As a superuser, log the statements of the application's role only (new sessions of the role
-- take it; nothing else changes). Every search, with its parameters in full:
ALTER ROLE app SET log_min_duration_statement = 0;
-- or a sampled fraction of them (PostgreSQL 13+), e.g. one search in ten:
--   ALTER ROLE app SET log_min_duration_sample = 0;
--   ALTER ROLE app SET log_statement_sample_rate = 0.1;
-- The vector must be logged whole (-1, the default: no limit; a server that sets it lower
-- cuts the vector, and pgeval refuses the log):
ALTER SYSTEM SET log_parameter_max_length = -1;  SELECT pg_reload_conf();
-- Cost: one log line per search plus its parameters (about 8 bytes a dimension: a 384-d search
-- is about 3.5 kB of log, 3.5 GB a million searches; psycopg 3 logs a prepared search twice,
-- bind and execute). Sample, and switch it off once enough searches are captured:
ALTER ROLE app RESET log_min_duration_statement;
ALTER ROLE app RESET log_min_duration_sample;
ALTER ROLE app RESET log_statement_sample_rate;
-- Then, with the log file(s) of the server (SHOW data_directory / log_directory):
--   pgeval queries capture LOGFILE... --target NAME --name SET
"""


@dataclass(frozen=True)
class Captured:
    """One distinct search: its shape, vector, other values, and how often and when sent."""

    shape: str
    vector: tuple[float, ...]
    params: tuple[str | None, ...]
    k: int | None
    operator: str
    filters: tuple[tuple[str, int], ...] = ()
    sent: int = 1
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    @property
    def query_id(self) -> str:
        """A digest of what was sent: the same search keeps its id in every capture."""
        return "c" + sha256_hex([self.shape, self.vector, self.params])[:15]


@dataclass
class CaptureReport:
    """What `pgeval queries capture` kept and skipped, in counts."""

    name: str
    target: str
    files: list[str]
    entries: int = 0
    searches: int = 0  # executions of the target's searches read
    queries: int = 0  # distinct queries stored (after --max)
    found: int = 0  # distinct queries found in these files
    shapes: list[dict] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    appended: bool = False
    since: str | None = None
    until: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _when(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"'{text}' is not a time (write it as 2026-12-07 08:00 or 2026-12-07T08:00:00+00:00)",
            field=param(option),
        ) from None


def _in_window(when: datetime | None, since: datetime | None, until: datetime | None) -> bool:
    if when is None:
        return since is None and until is None
    for bound, after in ((since, True), (until, False)):
        if bound is None:
            continue
        a, b = when, bound
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
        if (after and a < b) or (not after and a >= b):
            return False
    return True


def read_logs(
    paths: list[str],
    target: Target,
    *,
    fmt: str,
    prefix: str,
    since: datetime | None,
    until: datetime | None,
    report: CaptureReport,
) -> dict[tuple, Captured]:
    """The distinct searches of ``target`` in the logs, keyed by (shape, vector, values)."""
    found: dict[tuple, Captured] = {}
    skipped: Counter[str] = Counter()
    column, table = target.vector_column, target.table
    dim = target.dimension
    for entry in log_entries.read(paths, fmt, prefix):
        report.entries += 1
        m = _STATEMENT.match(entry.message) if entry.severity == "LOG" else None
        if m is None:
            continue
        if m["kind"] in ("bind", "parse"):
            skipped["bind or parse line (its execute line is the search)"] += 1
            continue
        if m["kind"] == "execute" and (m["name"] or "").startswith("fetch from"):
            continue
        if not _in_window(entry.time, since, until):
            skipped["outside --since/--until"] += 1
            continue
        try:
            s = searches.read(m["text"], searches.parameters(entry.detail), column, table)
        except searches.Skip as why:
            skipped[why.reason] += 1
            continue
        except searches.Unreadable as why:
            file, _, line = entry.where.rpartition(":")
            raise InputError(
                f"a search of target '{target.name}' whose query vector the log does not hold "
                f"whole ({why}): log its parameters in full with log_parameter_max_length = -1 "
                "(`pgeval queries capture --how`)",
                file=file,
                line=int(line),
            ) from None
        if dim is not None and len(s.vector) != dim:
            file, _, line = entry.where.rpartition(":")
            raise InputError(
                f"the query vector has {len(s.vector)} dimensions, target '{target.name}' "
                f"searches {dim}",
                file=file,
                line=int(line),
            )
        dim = len(s.vector)
        report.searches += 1
        key = (s.shape, s.vector, s.params)
        was = found.get(key)
        found[key] = Captured(
            s.shape,
            s.vector,
            s.params,
            s.limit,
            s.operator,
            s.filters,
            1 + (was.sent if was else 0),
            was.first_seen if was and was.first_seen else entry.time,
            entry.time or (was.last_seen if was else None),
        )
    report.skipped = dict(skipped.most_common())
    report.found = len(found)
    return found


def capture(
    database: Database,
    paths: list[str],
    *,
    target: str,
    name: str,
    fmt: str = "auto",
    prefix: str | None = None,
    since: str | None = None,
    until: str | None = None,
    max_queries: int | None = None,
    append: bool = False,
    replace: bool = False,
) -> CaptureReport:
    """Read the logs, keep the target's searches, store them as set ``name``."""
    from ..targets.targets import load

    if not paths:
        raise InputError("no log file given", field=param("logfile"))
    if fmt not in log_entries.FORMATS:
        raise InputError(f"unknown log format '{fmt}'", field=param("log_format"))
    if max_queries is not None and max_queries < 1:
        raise InputError("must be at least 1", field=param("max"))
    if append and replace:
        raise InputError(f"{param('append')} and {param('replace')} exclude each other")
    t_since, t_until = _when(since, "since"), _when(until, "until")
    with _installed(database) as conn:
        tg = load(conn, target)
        conn.rollback()
    if prefix is None:
        prefix = _server_prefix(database)
    report = CaptureReport(name, target, list(paths), since=since, until=until)
    found = read_logs(
        paths, tg, fmt=fmt, prefix=prefix, since=t_since, until=t_until, report=report
    )
    if not found:
        why = ", ".join(f"{n} {r}" for r, n in report.skipped.items()) or "none"
        raise InputError(
            f"no search of target '{target}' (ORDER BY {tg.vector_column} <distance> ... LIMIT "
            f"on {tg.table}) in {report.entries} log entries (skipped: {why})"
        )
    kept = list(found.values())
    if max_queries is not None and len(kept) > max_queries:  # reproducible: by query id
        kept = sorted(kept, key=lambda c: c.query_id)[:max_queries]
    with database.connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("captured:" + name,))
        _write(conn, report, tg, kept, append=append, replace=replace)
    return report


@contextmanager
def _installed(database: Database) -> Iterator[Any]:
    """A results connection, its schema at this pgeval's revision."""
    from ..core.install import ensure_installed

    with database.connect() as conn:
        ensure_installed(conn)
        yield conn


def _server_prefix(database: Database) -> str:
    """The server's log_line_prefix (the default where it cannot be read)."""
    try:
        with database.connect(results=False, read_only=True) as kb:
            row = kb.execute("SELECT current_setting('log_line_prefix')").fetchone()
            kb.rollback()
            return str(row[0]) if row else log_entries.DEFAULT_PREFIX
    except Exception:  # noqa: BLE001 - a server that does not say: PostgreSQL's default
        return log_entries.DEFAULT_PREFIX


def _write(
    conn: Any,
    report: CaptureReport,
    tg: Target,
    kept: list[Captured],
    *,
    append: bool,
    replace: bool,
) -> None:
    row = conn.execute(
        "SELECT set_id, target FROM pgeval.captured_set WHERE name = %s", (report.name,)
    ).fetchone()
    record = {k: v for k, v in report.as_dict().items() if k not in ("shapes", "name", "target")}
    record["captured_at"] = datetime.now().astimezone().isoformat(timespec="seconds")
    dim = len(kept[0].vector)
    old: dict[str, tuple] = {}
    shapes: dict[str, int] = {}
    if row is not None and not (append or replace):
        raise Conflict(
            f"captured set '{report.name}' exists: {param('append')} adds a newer log to it, "
            f"{param('replace')} captures it anew"
        )
    if row is not None and append:
        if row[1] != tg.name:
            raise Conflict(f"captured set '{report.name}' is of target '{row[1]}', not '{tg.name}'")
        set_id = row[0]
        shapes = dict(
            conn.execute(
                "SELECT statement, shape FROM pgeval.captured_shape WHERE set_id = %s", (set_id,)
            ).fetchall()
        )
        old = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT query_id, sent, first_seen, last_seen FROM pgeval.captured_query "
                "WHERE set_id = %s",
                (set_id,),
            )
        }
        conn.execute(
            "UPDATE pgeval.captured_set SET updated_at = now(), captures = captures || %s "
            "WHERE set_id = %s",
            (json.dumps([record]), set_id),
        )
        report.appended = True
    else:
        if row is not None:
            conn.execute("DELETE FROM pgeval.captured_set WHERE set_id = %s", (row[0],))
        set_id = conn.execute(
            "INSERT INTO pgeval.captured_set (name, target, dimension, captures) "
            "VALUES (%s, %s, %s, %s) RETURNING set_id",
            (report.name, tg.name, dim, json.dumps([record])),
        ).fetchone()[0]
    for c in sorted(kept, key=lambda c: (c.first_seen is None, c.first_seen or 0, c.query_id)):
        if c.shape not in shapes:
            shapes[c.shape] = len(shapes) + 1
            conn.execute(
                "INSERT INTO pgeval.captured_shape (set_id, shape, statement, operator, k, params, "
                "filters) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    set_id,
                    shapes[c.shape],
                    c.shape,
                    c.operator,
                    c.k,
                    len(c.params),
                    json.dumps(dict(c.filters)),
                ),
            )
    merged = []
    for c in kept:
        sent, first, last = c.sent, c.first_seen, c.last_seen
        if c.query_id in old:
            before = old[c.query_id]
            sent += before[0]
            first = min((t for t in (first, before[1]) if t is not None), default=None)
            last = max((t for t in (last, before[2]) if t is not None), default=None)
        merged.append(
            (set_id, c.query_id, shapes[c.shape], list(c.vector), list(c.params), sent, first, last)
        )
    conn.execute(
        "DELETE FROM pgeval.captured_query WHERE set_id = %s AND query_id = ANY(%s)",
        (set_id, [m[1] for m in merged if m[1] in old]),
    )
    with conn.cursor().copy(
        "COPY pgeval.captured_query (set_id, query_id, shape, vector, params, sent, first_seen, "
        "last_seen) FROM STDIN"
    ) as copy:
        for m in merged:
            copy.write_row(m)
    report.queries = len(kept)
    report.shapes = shape_rows(conn, set_id)


def shape_rows(conn: Any, set_id: int) -> list[dict]:
    rows = conn.execute(
        "SELECT s.shape, s.statement, s.operator, s.k, s.params, s.filters, count(q.query_id), "
        "coalesce(sum(q.sent), 0), min(q.first_seen), max(q.last_seen), "
        "count(DISTINCT q.params) FROM pgeval.captured_shape s "
        "LEFT JOIN pgeval.captured_query q USING (set_id, shape) WHERE s.set_id = %s "
        "GROUP BY s.shape, s.statement, s.operator, s.k, s.params, s.filters ORDER BY s.shape",
        (set_id,),
    ).fetchall()
    keys = ("shape", "statement", "operator", "k", "params", "filters", "queries", "sent", "first_seen",
            "last_seen", "values")  # fmt: skip
    out = []
    for r in rows:
        d = dict(zip(keys, r, strict=True))
        for t in ("first_seen", "last_seen"):
            d[t] = d[t].isoformat() if d[t] is not None else None
        out.append(d)
    return out


def _set(conn: Any, name: str) -> tuple:
    row = conn.execute(
        "SELECT set_id, name, target, dimension, created_at, updated_at, captures "
        "FROM pgeval.captured_set WHERE name = %s",
        (name,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no captured set '{name}' (`pgeval queries list` lists them)")
    return row


def list_sets(database: Database) -> list[dict]:
    with _installed(database) as conn:
        rows = conn.execute(
            "SELECT c.name, c.target, c.dimension, count(DISTINCT q.shape), count(q.query_id), "
            "coalesce(sum(q.sent), 0), min(q.first_seen), max(q.last_seen) "
            "FROM pgeval.captured_set c LEFT JOIN pgeval.captured_query q USING (set_id) "
            "GROUP BY c.set_id ORDER BY c.name"
        ).fetchall()
    keys = ("name", "target", "dimension", "shapes", "queries", "sent", "first_seen", "last_seen")
    return [
        {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in zip(keys, r, strict=True)}
        for r in rows
    ]


def show(database: Database, name: str) -> dict:
    with _installed(database) as conn:
        row = _set(conn, name)
        values = conn.execute(
            "SELECT shape, params, count(*), sum(sent) FROM pgeval.captured_query "
            "WHERE set_id = %s AND cardinality(params) > 0 GROUP BY shape, params "
            "ORDER BY shape, sum(sent) DESC, params LIMIT 200",
            (row[0],),
        ).fetchall()
        return {
            "name": row[1],
            "target": row[2],
            "dimension": row[3],
            "created_at": row[4].isoformat(),
            "updated_at": row[5].isoformat(),
            "captures": row[6],
            "shapes": shape_rows(conn, row[0]),
            "values": [
                {"shape": v[0], "params": v[1], "queries": v[2], "sent": int(v[3])} for v in values
            ],
        }


def delete(database: Database, name: str) -> None:
    with _installed(database) as conn:
        row = _set(conn, name)
        conn.execute("DELETE FROM pgeval.captured_set WHERE set_id = %s", (row[0],))
        conn.commit()


def rows(conn: Any, name: str, *, shape: int | None = None) -> list[tuple]:
    """(query_id, shape, vector, params, sent, last_seen) of a set (a shape's only: ``shape``),
    in query id order."""
    set_id = _set(conn, name)[0]
    if (
        shape is not None
        and not conn.execute(
            "SELECT 1 FROM pgeval.captured_shape WHERE set_id = %s AND shape = %s", (set_id, shape)
        ).fetchone()
    ):
        raise InputError(f"captured set '{name}' has no shape {shape}", field=param("shape"))
    return conn.execute(
        "SELECT query_id, shape, vector, params, sent, last_seen FROM pgeval.captured_query "
        'WHERE set_id = %s AND (%s::int IS NULL OR shape = %s) ORDER BY query_id COLLATE "C"',
        (set_id, shape, shape),
    ).fetchall()


def export(database: Database, name: str, path: str, *, shape: int | None = None) -> int:
    """Write the set's vectors: ``.npy`` (a matrix, rows in query id order) or JSONL
    (``{"id", "embedding", "shape", "params", "sent"}``, readable by ``--queries-file``)."""
    import numpy as np

    with database.connect() as conn:
        got = rows(conn, name, shape=shape)
    out = Path(path)
    tmp = out.with_name(out.name + ".part")
    if out.suffix.lower() == ".npy":
        with tmp.open("wb") as fh:
            np.save(fh, np.asarray([r[2] for r in got], dtype=np.float32))
    else:
        with tmp.open("w", encoding="utf-8") as fh:
            for r in got:
                rec = {"id": r[0], "embedding": r[2], "shape": r[1], "params": r[3], "sent": r[4]}
                fh.write(json.dumps(rec) + "\n")
    tmp.replace(out)
    return len(got)
