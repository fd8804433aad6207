"""Loading a test set: all or nothing, in one transaction, streaming.

Rows from the format parser go through ``COPY ... FROM STDIN (FORMAT BINARY)`` into a temporary
staging table while their normalised content is hashed (sha256, grade map included). Set rules
then run in SQL over the staging table, and only then are ``pgeval.testset``, ``pgeval.query``
and ``pgeval.qrel`` written and ``pgeval.refresh_ideal`` called. Any error rolls everything back.
Memory stays constant: nothing is held per line in Python.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import Conflict, InputError, param
from ..core.install import ensure_installed
from .catalog import lock_name
from .grademap import GradeMap
from .plan import make_plan
from .progress import LoadProgress
from .records import COLUMNS, TYPES, canonical
from .validate import check_staged, duplicate_judgement

if TYPE_CHECKING:
    from pathlib import Path

    from .plan import Plan
    from .progress import LoadProgress

HASH_VERSION = b"pgeval-testset-v1\n"
STAGE = "pg_temp.pgeval_stage"


@dataclass
class LoadReport:
    name: str
    testset_id: int
    n_queries: int
    n_judgements: int
    n_valid: int  # at least one chunk of grade >= 1
    n_no_relevant: int  # answerable (or no flag) but no chunk of grade >= 1: "excluded"
    n_unanswerable: int
    content_hash: str
    unchanged: bool = False  # same name, same content: nothing was rewritten
    replaced: bool = False
    runs_deleted: int = 0  # runs of the replaced test set (ON DELETE CASCADE)
    n_skipped: int = 0  # queries in a queries file that no judgement names (TREC, BEIR)
    source_format: str = ""
    source_file: str = ""
    grade_map: dict | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def load(
    conn: Any,
    path: str | Path,
    name: str,
    *,
    fmt: str | None = None,
    queries: str | Path | None = None,
    grade_map: str | dict[Any, Any] | GradeMap | None = None,
    replace: bool = False,
    progress: bool = False,
) -> LoadReport:
    """Load the test set in ``path`` under ``name``. ``fmt`` None guesses from the name (a folder
    is BEIR); ``grade_map`` is '1=3,2=2,...' or a dict. Raises InputError (file, line, field),
    Conflict (name taken by other content and no ``replace``)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError("a test set needs a non-empty name", field=param("name"))
    gmap = GradeMap.parse(grade_map)
    plan = make_plan(path, fmt, queries)
    started = time.perf_counter()
    ensure_installed(conn)
    with LoadProgress(plan.sources, progress) as bar, conn.transaction(), conn.cursor() as cur:
        lock_name(cur, name)
        _create_stage(cur)
        digest = _stream(cur, plan, gmap, bar)
        bar.phase("checking")
        check_staged(cur, plan.files, plan.labels)
        old = cur.execute(
            "SELECT testset_id, content_hash FROM pgeval.testset WHERE name = %s FOR UPDATE",
            (name,),
        ).fetchone()
        if old is not None and old[1] == digest:
            report = _report(cur, name, old[0], digest, plan, gmap)
            report.unchanged = True
            report.seconds = time.perf_counter() - started
            return report
        runs = 0
        if old is not None:
            runs = cur.execute(
                "SELECT count(*) FROM pgeval.run WHERE testset_id = %s", (old[0],)
            ).fetchone()[0]
            if not replace:
                raise Conflict(
                    f"test set '{name}' already exists with different content (stored "
                    f"hash {old[1][:12]}, this file {digest[:12]}); pass {param('replace', True)} to "
                    f"replace it, which deletes its {runs} run(s)"
                )
            cur.execute("DELETE FROM pgeval.testset WHERE testset_id = %s", (old[0],))
        bar.phase("writing")
        tid, n_queries, n_judged = _write(cur, plan, name, digest, gmap)
        bar.phase("ideal DCG")
        finish(cur, tid, n_queries, n_judged)
        report = _report(cur, name, tid, digest, plan, gmap)
        report.replaced, report.runs_deleted = old is not None, runs
        report.n_skipped = (
            cur.execute(f"SELECT count(*) FROM {STAGE} WHERE is_query").fetchone()[0] - n_queries
            if plan.judged_only
            else 0
        )
    report.seconds = time.perf_counter() - started
    return report


def finish(cur: Any, tid: int, n_queries: int, n_judgements: int) -> None:
    """A test set's queries and judgements written: its ideal DCG and its counts."""
    # fresh statistics: without them the planner takes the new test set for an empty one and
    # refresh_ideal's join turns quadratic (seen: 60 s instead of 0.5 s for 20k queries)
    cur.execute("ANALYZE pgeval.query")
    cur.execute("SELECT pgeval.refresh_ideal(%s)", (tid,))
    cur.execute(
        "UPDATE pgeval.testset SET n_queries = %s, n_judgements = %s WHERE testset_id = %s",
        (n_queries, n_judgements, tid),
    )


def _create_stage(cur: Any) -> None:
    cols = ", ".join(f"{c} {t}" for c, t in zip(COLUMNS, TYPES))
    cur.execute(f"DROP TABLE IF EXISTS {STAGE}")
    cur.execute(f"CREATE TEMPORARY TABLE pgeval_stage ({cols}) ON COMMIT DROP")


def _stream(cur: Any, plan: Plan, gmap: GradeMap, bar: LoadProgress) -> str:
    digest = hashlib.sha256(HASH_VERSION)
    update = digest.update
    with cur.copy(f"COPY {STAGE} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(TYPES)
        write = copy.write_row
        for i, row in enumerate(plan.parse(gmap)):
            write(row)
            update(canonical(row))
            if not i & 0x3FFF:
                bar.advance()
    update(b"grade_map " + json.dumps(gmap.as_json(), sort_keys=True).encode())
    return digest.hexdigest()


def _write(cur: Any, plan: Plan, name: str, digest: str, gmap: GradeMap) -> tuple[int, int, int]:
    gm = gmap.as_json()
    tid = cur.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, source_file, grade_map) "
        "VALUES (%s, %s, %s, %s, %s) RETURNING testset_id",
        (name, digest, plan.fmt, plan.files[0], None if gm is None else json.dumps(gm)),
    ).fetchone()[0]
    if plan.queries_from_judgements:
        cur.execute(
            f"""
            INSERT INTO pgeval.query (testset_id, query_id, position, query_text)
            SELECT %s, query_id, row_number() OVER (ORDER BY min(line)), NULL
              FROM {STAGE} WHERE NOT is_query GROUP BY query_id""",
            (tid,),
        )
    else:
        judged = (
            f"AND query_id IN (SELECT query_id FROM {STAGE} WHERE NOT is_query)"
            if plan.judged_only
            else ""
        )
        cur.execute(
            f"""
            INSERT INTO pgeval.query (testset_id, query_id, position, query_text, types,
                                      answerable, expected_facts, embedding)
            SELECT %s, query_id, row_number() OVER (ORDER BY file, line), query_text,
                   coalesce(types, '{{}}'), coalesce(answerable, true),
                   coalesce(facts, '[]')::jsonb, embedding::vector
              FROM {STAGE} WHERE is_query {judged}""",
            (tid,),
        )
    n_queries = cur.rowcount
    try:
        with cur.connection.transaction():
            cur.execute(
                f"""
                INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade, source_grade)
                SELECT %s, s.query_id, u.chunk, u.grade, u.source
                  FROM {STAGE} s, unnest(s.chunks, s.grades, s.source_grades)
                       AS u(chunk, grade, source)""",
                (tid,),
            )
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "23505":  # unique_violation
            raise
        err = duplicate_judgement(cur, plan.files, plan.labels["chunk"])
        if err is None:
            raise
        raise err from None
    return tid, n_queries, cur.rowcount


def _report(cur: Any, name: str, tid: int, digest: str, plan: Plan, gmap: GradeMap) -> LoadReport:
    row = cur.execute(
        """
        SELECT t.n_queries, t.n_judgements,
               count(q.*) FILTER (WHERE cardinality(q.grades_desc) > 0),
               count(q.*) FILTER (WHERE q.answerable AND cardinality(q.grades_desc) = 0),
               count(q.*) FILTER (WHERE NOT q.answerable)
          FROM pgeval.testset t LEFT JOIN pgeval.query q USING (testset_id)
         WHERE t.testset_id = %s GROUP BY t.testset_id""",
        (tid,),
    ).fetchone()
    return LoadReport(
        name,
        tid,
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        digest,
        source_format=plan.fmt,
        source_file=plan.files[0],
        grade_map=gmap.as_json(),
    )
