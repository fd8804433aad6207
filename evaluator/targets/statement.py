"""A target defined by the application's own statement (``pgeval target add --statement``).

The statement is what the application runs for one search::

    SELECT id, embedding <=> $1 AS distance FROM docs WHERE tenant = $2
     ORDER BY embedding <=> $1 LIMIT 10

``$1`` is the query vector; ``$2`` the value of the target's group column (``--group-by``): a
grouped sweep samples each group's queries from the group's rows and binds its value, as the
application scopes each search by its tenant. No other parameter is bound, but for a captured
shape's statement (targets/shapes.py: ``Target.bound``), whose queries each bind the values
``$2, $3 ...`` they were sent with (:func:`query_values`) and whose rows may carry no distance.

It is read by the SQL API's own reader, ``pgeval.checked_statement`` (sql/230_evaluate_query_
recall.sql: one query, no write, no second statement; its parameters found outside literals,
quoted identifiers, comments and dollar quotes), which ``pgeval.evaluate_recall`` uses too: the
format() template it returns (each ``$n`` as ``%n$s``, every ``%`` doubled) is stored with the
target, and :func:`composed` turns it back into the statement with pgeval's placeholders. Its
*exact twin* is the same statement under :data:`TWIN_SETTINGS`, the settings
``pgeval.apply_settings(..., true)`` sets for ``pgeval.evaluate_recall``'s (a test keeps them
equal), its plan checked to scan no ANN index (ground_truth/statement_twin.py).

Checked when the target is added (:func:`check`): the reader's checks, a ``$1``, no parameter
past ``$2`` (and ``$2`` only with ``--group-by``), an ORDER BY and a LIMIT, and, on one row of
the table, the result's columns: the target's id column and a numeric ``distance`` column
(recall counts a row within the K-th exact distance: ties need the distance).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, first_line, param
from ..core.vector_literal import vector_literal

if TYPE_CHECKING:
    from psycopg import sql

    from .targets import Target

# the exact twin's settings: approximate index scans off, a sequential scan allowed (a btree on
# a filter still serves it through a bitmap scan, which no ANN access method offers)
TWIN_SETTINGS = {"enable_indexscan": "off", "enable_indexonlyscan": "off", "enable_seqscan": "on"}
# the distance each pgvector operator computes (the target's distance, read from the statement)
OPERATORS = {"<=>": "cosine", "<->": "l2", "<#>": "ip"}
DISTANCE_COLUMN = "distance"
VECTOR_PARAM, GROUP_PARAM = "q", "p2"  # pgeval's names of $1 and $2
NUMERIC_TYPES = {"float4", "float8", "numeric", "int2", "int4", "int8"}
_TOKEN = re.compile(r"%(?:%|(\d+)\$s)")


@dataclass(frozen=True)
class Read:
    """The statement as pgeval.checked_statement reads it: its format() template, the highest
    parameter number, and its code (string literals, quoted identifiers and comments blanked)."""

    template: str
    max_param: int
    code: str


def read(results: Any, text: str) -> Read:
    """``text`` read by the SQL API (pgeval.checked_statement, pgeval.statement_parts); its
    refusal as one line naming ``--statement``."""
    import psycopg

    fn = param("statement")
    try:
        row = results.execute(
            "SELECT c.template, c.max_param, (pgeval.statement_parts(%(s)s)).code "
            "FROM pgeval.checked_statement(%(fn)s, %(s)s) c",
            {"s": text, "fn": fn},
        ).fetchone()
    except psycopg.Error as exc:
        results.rollback()
        raise InputError(first_line(exc), field=fn) from None
    results.rollback()
    return Read(row[0], int(row[1]), row[2])


def read_file(path: str) -> str:
    """The statement of ``--statement-file PATH`` (UTF-8)."""
    from pathlib import Path

    field = param("statement_file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}", field=field) from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text", field=field) from None
    if not text.strip():
        raise InputError(f"{path}: the file is empty: give the application's SELECT", field=field)
    return text


def distance_of(code: str, given: str | None) -> str:
    """The target's distance: the one operator the statement orders by (``given`` must agree),
    else ``given`` (default cosine)."""
    found = sorted({d for op, d in OPERATORS.items() if op in code})
    if len(found) == 1:
        if given is not None and given != found[0]:
            raise InputError(
                f"the statement computes the {found[0]} distance but {param('distance')} is "
                f"{given}: drop {param('distance')} or make them agree",
                field=param("distance"),
            )
        return found[0]
    return given or "cosine"


def check_text(got: Read, group_by: str | None) -> None:
    """The parameters and clauses a statement target needs (before the catalog is read)."""
    field = param("statement")
    lowered = got.code.lower()
    if not re.search(r"\$1(?![0-9])", got.code):
        raise InputError(
            f"{field}: the statement has no $1 (the query vector): write it as the application "
            "does, e.g. ORDER BY embedding <=> $1 LIMIT 10",
            field=field,
        )
    if got.max_param > 2:
        raise InputError(
            f"{field}: the statement has ${got.max_param}: pgeval binds $1 (the query vector) "
            f"and $2 (the group's value, {param('group_by')}) only",
            field=field,
        )
    if got.max_param == 2 and not group_by:
        raise InputError(
            f"{field}: the statement has $2 but the target has no {param('group_by')}: $2 is "
            f"the value of the group column each search is scoped by (give {param('group_by')} "
            "COLUMN)",
            field=field,
        )
    if got.max_param < 2 and group_by:
        raise InputError(
            f"{field}: the target groups by {group_by} but the statement has no $2: scope it as "
            f"the application does (WHERE {group_by} = $2), or drop {param('group_by')}",
            field=field,
        )
    for clause, pattern in (("ORDER BY", r"\border\s+by\b"), ("LIMIT", r"\blimit\b")):
        if not re.search(pattern, lowered):
            raise InputError(
                f"{field}: the statement has no {clause}: write it as the application does, "
                "e.g. ORDER BY embedding <=> $1 LIMIT 10",
                field=field,
            )


def composed(template: str, ph: Callable[[str], sql.Composable], *, escape: bool) -> sql.Composed:
    """The statement of a format() ``template`` with ``ph(name)`` for each parameter (``q`` for
    $1, ``p2`` for $2); ``escape``: each ``%`` kept doubled (the statement runs with bound
    parameters, psycopg's placeholders), else single (``$n`` placeholders, run as written)."""
    from psycopg import sql

    parts: list[sql.Composable] = []
    text: list[str] = []
    at = 0
    for m in _TOKEN.finditer(template):
        text.append(template[at : m.start()])
        at = m.end()
        if m.group(1) is None:
            text.append("%%" if escape else "%")
            continue
        parts.append(sql.SQL("".join(text)))
        text = []
        parts.append(ph(param_name(int(m.group(1)))))
    text.append(template[at:])
    parts.append(sql.SQL("".join(text)))
    return sql.Composed(parts)


def param_name(number: int) -> str:
    return VECTOR_PARAM if number == 1 else f"p{number}"


def parameters(template: str) -> int:
    """The highest parameter number of a stored template."""
    return max((int(n) for n in re.findall(r"(?<!%)(?:%%)*%(\d+)\$s", template)), default=0)


def values(target: Target) -> dict:
    """The parameters a search of ``target`` binds besides the vector: $2, the group's value
    (the target scoped to a group, :meth:`Target.scoped`)."""
    assert target.statement_template is not None
    if target.bound:  # a captured shape's: the first query's (what its plan is checked with)
        return query_values(target, min(target.bound))
    if parameters(target.statement_template) < 2:
        if target.scope is not None:
            raise InputError(
                f"target '{target.name}': its statement has no $2, so it cannot be scoped to "
                f"one {target.scope[0]} as {param('group_by')} measures it: add WHERE "
                f"{target.scope[0]} = $2 (target add {param('group_by')} {target.scope[0]} "
                f"{param('statement')} …), or measure it ungrouped",
                field=param("group_by"),
            )
        return {}
    if target.scope is None:
        raise InputError(
            f"target '{target.name}': its statement takes $2, the value of {target.group_by}: "
            f"it is measured per group (give {param('sample_queries')} N: N queries per group)",
            field=param("group_by"),
        )
    return {GROUP_PARAM: target.scope[1]}


def query_values(target: Target, query_id: str) -> dict:
    """The values of $2, $3 ... a captured shape's query ``query_id`` was sent with (none for
    any other target: its $2 is the group's, :func:`values`)."""
    sent = target.bound.get(query_id, ())
    return {param_name(n): v for n, v in enumerate(sent, 2)}


def columns_of(names: list[str], target: Target) -> tuple[int, int | None]:
    """(position of the id column, position of the distance column) in the result's columns;
    a captured shape's statement may return no distance (None: read after it, untimed:
    :func:`evaluator.stages.statement_sql.with_distances`)."""
    wanted = (target.id_column,) if target.bound else (target.id_column, DISTANCE_COLUMN)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise InputError(
            f"{param('statement')}: the statement returns {', '.join(names) or 'no column'}, "
            f"not {' and '.join(missing)}: it returns the id column ({param('id_column')} "
            f"{target.id_column}) and the distance (… <=> $1 AS {DISTANCE_COLUMN})",
            field=param("statement"),
        )
    at = names.index(DISTANCE_COLUMN) if DISTANCE_COLUMN in names else None
    return names.index(target.id_column), at


def ranked(rows: list, positions: tuple[int, int | None]) -> list[tuple[str, float | None]]:
    """The statement's rows as (chunk id, distance), in the order the statement returned them
    (pgeval ranks them by (distance, chunk id) afterwards); the id as text, as PostgreSQL's
    ``::text`` spells it for text, integer and uuid ids."""
    i, d = positions
    if d is None:
        return [(str(r[i]), None) for r in rows]
    return [(str(r[i]), None if r[d] is None else float(r[d])) for r in rows]


def check(kb: Any, target: Target) -> None:
    """The statement run on one row of the table (``LIMIT 0`` around it: planned, nothing
    fetched): it runs, and it returns the id column and a numeric distance column."""
    from psycopg import sql

    from ..core.vector_types import register_vector

    assert target.statement_template is not None
    register_vector(kb)
    col = sql.Identifier(target.vector_column)
    row = kb.execute(
        sql.SQL("SELECT {c}::vector::text{g} FROM {t} WHERE {c} IS NOT NULL{gw} LIMIT 1").format(
            c=col,
            g=sql.SQL(", {}::text").format(sql.Identifier(target.group_by))
            if target.group_by
            else sql.SQL(""),
            t=target.table_sql(),
            gw=sql.SQL(" AND {} IS NOT NULL").format(sql.Identifier(target.group_by))
            if target.group_by
            else sql.SQL(""),
        )
    ).fetchone()
    kb.rollback()
    vector = row[0] if row else vector_literal([0.0] * int(target.dimension or 1))
    bound = {VECTOR_PARAM: vector}
    if target.bound:  # a captured shape's: its first query's values
        bound.update(values(target))
    elif parameters(target.statement_template) >= 2:
        bound[GROUP_PARAM] = row[1] if row else ""
    # (the vector as text, of no type: the server reads it as the statement's context asks)
    inner = composed(target.statement_template, sql.Placeholder, escape=True)
    stmt = sql.SQL("SELECT * FROM ({}) pgeval_statement LIMIT 0").format(inner)
    try:
        cur = kb.execute(stmt, bound)
    except Exception as exc:
        kb.rollback()
        raise InputError(
            f"{param('statement')}: the statement does not run on {target.qualified()}: "
            f"{first_line(exc)}",
            field=param("statement"),
        ) from None
    desc = cur.description or []
    types = _type_names(kb, [d.type_code for d in desc])
    kb.rollback()
    names = [d.name for d in desc]
    _, at = columns_of(names, target)
    if at is not None and types.get(desc[at].type_code) not in NUMERIC_TYPES:
        raise InputError(
            f"{param('statement')}: its column {DISTANCE_COLUMN} is "
            f"{types.get(desc[at].type_code, 'not a number')}, not a number",
            field=param("statement"),
        )


def _type_names(kb: Any, oids: list[int]) -> dict[int, str]:
    rows = kb.execute(
        "SELECT oid::int, typname::text FROM pg_type WHERE oid = ANY(%s)", (oids,)
    ).fetchall()
    return {int(o): n for o, n in rows}
