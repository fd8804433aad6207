"""Stored test sets: resolve a name, list them, describe one, delete one."""

from __future__ import annotations

from typing import Any

from ..core.db import dict_rows
from ..core.errors import NotFound
from ..core.install import ensure_installed

_COUNTS = """
    count(q.*) FILTER (WHERE cardinality(q.grades_desc) > 0) AS valid,
    count(q.*) FILTER (WHERE q.answerable AND cardinality(q.grades_desc) = 0) AS excluded,
    count(q.*) FILTER (WHERE NOT q.answerable) AS unanswerable"""


# what a test set's description counts besides its totals, each (value, count): the grade
# histogram, who graded the judgements (human, or a model judge: docs/judging.md), the type tags
_HISTOGRAMS = {
    "grades": "SELECT grade::text, count(*) FROM pgeval.qrel WHERE testset_id = %s "
    "GROUP BY grade ORDER BY grade",
    "sources": "SELECT source, count(*) FROM pgeval.qrel WHERE testset_id = %s "
    "GROUP BY source ORDER BY source <> 'human', source",
    "types": "SELECT t, count(*) FROM pgeval.query, unnest(types) AS t WHERE testset_id = %s "
    "GROUP BY t ORDER BY count(*) DESC, t",
}


def lock_name(conn: Any, name: str) -> None:
    """Hold, until the transaction ends, the lock that serialises the writers of test set
    ``name`` (a load, a new version, a query set)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("pgeval.testset:" + name,)
    )


def find_testset(conn: Any, name: str) -> tuple[int, str] | None:
    """(testset_id, content_hash) of the test set called ``name``, or None."""
    row = conn.execute(
        "SELECT testset_id, content_hash FROM pgeval.testset WHERE name = %s", (name,)
    ).fetchone()
    return (row[0], row[1]) if row is not None else None


def resolve_testset(conn: Any, name: str) -> tuple[int, str]:
    """(testset_id, content_hash) of the test set called ``name``; NotFound otherwise."""
    row = find_testset(conn, name)
    if row is None:
        raise NotFound(f"no test set named '{name}' (see `pgeval testset list`)")
    return row[0], row[1]


def list_testsets(conn: Any) -> list[dict]:
    ensure_installed(conn)
    return dict_rows(
        conn,
        f"""
        SELECT t.name, t.n_queries AS queries, t.n_judgements AS judgements, {_COUNTS},
               (SELECT count(*) FROM pgeval.run r WHERE r.testset_id = t.testset_id) AS runs,
               t.source_format AS format, t.content_hash, t.created_at AS created
          FROM pgeval.testset t LEFT JOIN pgeval.query q USING (testset_id)
         GROUP BY t.testset_id ORDER BY t.name""",
    )


def show_testset(conn: Any, name: str) -> dict:
    """Counts, grade histogram, type tags, embeddings, grade map and hash of one test set."""
    ensure_installed(conn)
    tid, _ = resolve_testset(conn, name)
    info = dict_rows(
        conn,
        f"""
        SELECT t.testset_id, t.name, t.source_format AS format, t.source_file, t.content_hash,
               t.grade_map, t.created_at AS created, t.n_queries AS queries, t.version,
               (SELECT p.name FROM pgeval.testset p WHERE p.testset_id = t.parent_id) AS parent,
               t.n_judgements AS judgements, {_COUNTS},
               count(q.*) FILTER (WHERE q.query_text IS NULL) AS without_text,
               count(q.embedding) AS with_embedding,
               min(vector_dims(q.embedding)) AS embedding_dim,
               (SELECT count(*) FROM pgeval.run r WHERE r.testset_id = t.testset_id) AS runs
          FROM pgeval.testset t LEFT JOIN pgeval.query q USING (testset_id)
         WHERE t.testset_id = %s GROUP BY t.testset_id""",
        (tid,),
    )[0]
    for key, statement in _HISTOGRAMS.items():
        info[key] = dict(conn.execute(statement, (tid,)).fetchall())
    return info


def delete_testset(conn: Any, name: str) -> int:
    """Delete the test set and (ON DELETE CASCADE) its queries, judgements and runs; returns the
    number of runs deleted."""
    ensure_installed(conn)
    with conn.transaction():
        tid, _ = resolve_testset(conn, name)
        runs = conn.execute(
            "SELECT count(*) FROM pgeval.run WHERE testset_id = %s", (tid,)
        ).fetchone()[0]
        conn.execute("DELETE FROM pgeval.testset WHERE testset_id = %s", (tid,))
    return runs
