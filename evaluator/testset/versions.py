"""Versions of a test set: the grades people gave a pool's holes (``pgeval testset holes``'s CSV)
read back into a new test set that holds its parent's judgements and the new ones, all or
nothing, in one transaction (docs/judging.md).

A version is a test set of its own (runs keep answering the version they ran on, so that no
figure changes under a stored run): ``parent_id`` the version it grew from, ``version`` its
number in the family (the first test set and every version grown from it), named
``ROOT@vN`` unless named otherwise. Its queries and stored query embeddings are its parent's.
Each judgement says who gave it (``pgeval.qrel.source``): ``human``, or a model judge's label
when its proposals were taken in on request (``model_judge``) for the holes left ungraded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..core.canonical import sha256_hex
from ..core.errors import Conflict, param
from ..core.install import ensure_installed
from ..core.spreadsheet import value
from . import judging
from .catalog import find_testset, lock_name, resolve_testset
from .formats.csv import records
from .source import Source
from .store import finish

if TYPE_CHECKING:
    from pathlib import Path

# the columns of a pool file, as `pgeval testset holes` writes them
POOL_COLUMNS = ("testset", "query_id", "query", "chunk_id", "chunk", "seen_at", "grade")
_READ = ("testset", "query_id", "chunk_id", "grade")
_REQUIRED = ("query_id", "chunk_id", "grade")
HASH_VERSION = "pgeval-testset-version-v1"
STAGE = "pg_temp.pgeval_grades"

# the family of a test set: up to its first version, then every version grown from that one
_FAMILY = """
WITH RECURSIVE up AS (
    SELECT testset_id, parent_id, name FROM pgeval.testset WHERE testset_id = %(tid)s
    UNION ALL
    SELECT t.testset_id, t.parent_id, t.name FROM pgeval.testset t JOIN up ON t.testset_id = up.parent_id
), down AS (
    SELECT testset_id, version FROM pgeval.testset
     WHERE testset_id = (SELECT testset_id FROM up WHERE parent_id IS NULL)
    UNION ALL
    SELECT t.testset_id, t.version FROM pgeval.testset t JOIN down ON t.parent_id = down.testset_id
)"""


@dataclass(frozen=True)
class GradeReport:
    name: str  # the new version (or the one holding the same content: ``unchanged``)
    testset_id: int
    version: int
    parent: str
    human: int  # judgements added from the file's grades
    model: int  # judgements added from the model judge's proposals (model_judge)
    ungraded: int  # rows of the file left without a grade (and without a model grade)
    judgements: int  # the version's judgements, its parent's included
    content_hash: str
    source_file: str
    model_judge: str | None = None
    agreement: judging.Agreement | None = None
    unchanged: bool = False

    def as_dict(self) -> dict:
        out = asdict(self)
        out["agreement"] = None if self.agreement is None else self.agreement.as_dict()
        return out


@dataclass(frozen=True)
class _Row:
    line: int
    query_id: str
    chunk_id: str
    grade: int | None


def read_pool(src: Source, testset: str | None) -> tuple[str, list[_Row]]:
    """(test set named, rows) of a pool file; InputError naming the line and field of the first
    bad cell: a grade not an integer 0-3, an empty id, a chunk listed twice for a query, rows
    naming different test sets, a file naming none."""
    rows: list[_Row] = []
    named = testset
    seen: dict[tuple[str, str], int] = {}
    for line, cell in records(src, _READ, _REQUIRED, "the file is empty (no header)"):
        if testset is None:
            if "testset" not in cell:
                raise src.error(
                    f"the header has no 'testset' column: pass {param('testset')} NAME",
                    line=1,
                    field="testset",
                )
            name = value(cell["testset"].strip())
            if named is not None and name != named:
                raise src.error(
                    f"names test set '{name}', an earlier row '{named}'", line=line, field="testset"
                )
            named = name
        qid, cid = value(cell["query_id"].strip()), value(cell["chunk_id"].strip())
        for field, text in (("query_id", qid), ("chunk_id", cid)):
            if not text:
                raise src.error("empty id", line=line, field=field)
        if (qid, cid) in seen:
            raise src.error(
                f"query '{qid}' lists chunk '{cid}' twice (lines {seen[qid, cid]} and {line})",
                line=line,
                field="chunk_id",
            )
        seen[qid, cid] = line
        rows.append(_Row(line, qid, cid, _grade(src, line, value(cell["grade"].strip()))))
    if not rows or not named:
        raise src.error("no rows: nothing to grade")
    return named, rows


def _grade(src: Source, line: int, text: str) -> int | None:
    if not text:
        return None
    if text not in ("0", "1", "2", "3"):
        raise src.error(f"grade '{text[:20]}' is not an integer 0-3", line=line, field="grade")
    return int(text)


def grade(
    conn: Any,
    path: str | Path,
    *,
    testset: str | None = None,
    name: str | None = None,
    model_judge: str | None = None,
) -> GradeReport:
    """A new version of the test set the pool file ``path`` names (or ``testset``) with the
    file's grades added (and, with ``model_judge``, that judge's stored proposals for the rows
    left ungraded). InputError (file, line, field) on bad input, Conflict when ``name`` is
    taken; nothing is written then."""
    src = Source(path)
    base, rows = read_pool(src, testset)
    ensure_installed(conn)
    with conn.transaction(), conn.cursor() as cur:
        tid, parent_hash = resolve_testset(conn, base)
        lock_name(cur, base)
        _stage(cur, rows)
        _check(cur, src, tid, base)
        agreement = None
        if model_judge:
            agreement = judging.agreement(conn, tid, model_judge)
            _take_model(cur, src, tid, agreement)
        added = cur.execute(
            f"SELECT query_id, chunk_id, grade, source FROM {STAGE} WHERE grade IS NOT NULL "
            "ORDER BY query_id, chunk_id"
        ).fetchall()
        if not added:
            raise src.error("no grades: fill the 'grade' column (0-3)", field="grade")
        digest = sha256_hex({"version": HASH_VERSION, "parent": parent_hash, "added": added})
        human = sum(1 for a in added if a[3] == "human")
        name, new_id, version, total, unchanged = _write(cur, tid, digest, name, str(path))
    return GradeReport(
        name,
        new_id,
        version,
        base,
        human,
        len(added) - human,
        len(rows) - len(added),
        total,
        digest,
        str(path),
        model_judge,
        agreement,
        unchanged,
    )


def _stage(cur: Any, rows: list[_Row]) -> None:
    cur.execute(f"DROP TABLE IF EXISTS {STAGE}")
    cur.execute(
        'CREATE TEMPORARY TABLE pgeval_grades (line integer, query_id text COLLATE "C", '
        'chunk_id text COLLATE "C", grade smallint, source text) ON COMMIT DROP'
    )
    with cur.copy(f"COPY {STAGE} (line, query_id, chunk_id, grade, source) FROM STDIN") as copy:
        for r in rows:
            copy.write_row((r.line, r.query_id, r.chunk_id, r.grade, "human"))


# the pool file's rows the test set refuses, each a statement finding the first such row
# (line, query, ...), the message it makes and the field it names
_REFUSED = (
    (
        f"SELECT line, query_id FROM {STAGE} s WHERE NOT EXISTS (SELECT 1 FROM pgeval.query q "
        "WHERE q.testset_id = %(tid)s AND q.query_id = s.query_id) ORDER BY line LIMIT 1",
        "query '{1}' is not in test set '{base}'",
        "query_id",
    ),
    (
        _FAMILY
        + f"""
        SELECT line, query_id, chunk_id FROM {STAGE} s
         WHERE NOT EXISTS (SELECT 1 FROM pgeval.run r JOIN pgeval.result_list l USING (run_id)
                            WHERE r.testset_id IN (SELECT testset_id FROM down)
                              AND l.query_id = s.query_id AND s.chunk_id = ANY (l.chunk_ids))
         ORDER BY line LIMIT 1""",
        "chunk '{2}' is in no stored list of query '{1}' (runs of test set '{base}' and its "
        "versions)",
        "chunk_id",
    ),
    (
        f"SELECT s.line, s.query_id, s.chunk_id, j.grade FROM {STAGE} s JOIN pgeval.qrel j "
        "ON j.testset_id = %(tid)s AND j.query_id = s.query_id AND j.chunk_id = s.chunk_id "
        "WHERE s.grade IS NOT NULL ORDER BY s.line LIMIT 1",
        "query '{1}' chunk '{2}' is judged already (grade {3}) in test set '{base}'",
        "grade",
    ),
)


def _check(cur: Any, src: Source, tid: int, base: str) -> None:
    """The first row naming a query the test set lacks, a chunk no run of its family retrieved
    for that query, or a chunk the test set judged already."""
    for statement, message, field in _REFUSED:
        row = cur.execute(statement, {"tid": tid}).fetchone()
        if row:
            raise src.error(message.format(*row, base=base), line=row[0], field=field)


def _take_model(cur: Any, src: Source, tid: int, agreement: judging.Agreement) -> None:
    """The judge's proposals for the rows left ungraded and not judged, marked as the judge's;
    refused when the judge was never compared with the people's grades."""
    if agreement.compared == 0:
        raise src.error(
            f"model judge '{agreement.judge}' has no grade on a chunk people judged in this "
            "test set: its agreement is unknown (run `pgeval testset holes` with --judge)",
            field=param("model_grades"),
        )
    cur.execute(
        f"""
        UPDATE {STAGE} s SET grade = m.grade, source = m.judge FROM pgeval.model_grade m
         WHERE s.grade IS NULL AND m.testset_id = %(tid)s AND m.judge = %(judge)s
           AND m.query_id = s.query_id AND m.chunk_id = s.chunk_id
           AND NOT EXISTS (SELECT 1 FROM pgeval.qrel j WHERE j.testset_id = %(tid)s
                              AND j.query_id = s.query_id AND j.chunk_id = s.chunk_id)""",
        {"tid": tid, "judge": agreement.judge},
    )


def _write(
    cur: Any, parent: int, digest: str, name: str | None, path: str
) -> tuple[str, int, int, int, bool]:
    """(name, id, version, judgements, unchanged) of the new version, or of the version of the
    family holding the same content."""
    root, version, same = cur.execute(
        _FAMILY
        + """
        SELECT (SELECT name FROM up WHERE parent_id IS NULL), (SELECT max(version) + 1 FROM down),
               (SELECT t.name FROM pgeval.testset t JOIN down USING (testset_id)
                 WHERE t.content_hash = %(digest)s LIMIT 1)""",
        {"tid": parent, "digest": digest},
    ).fetchone()
    if same is not None:  # graded the same way before: that version stands
        tid, version, n = cur.execute(
            "SELECT testset_id, version, n_judgements FROM pgeval.testset WHERE content_hash = %s "
            "AND name = %s",
            (digest, same),
        ).fetchone()
        return same, tid, version, n, True
    name = name or f"{root}@v{version}"
    if find_testset(cur.connection, name) is not None:
        raise Conflict(
            f"test set '{name}' exists already: name the new version with {param('name')}"
        )
    tid = cur.execute(
        "INSERT INTO pgeval.testset (name, content_hash, source_format, source_file, grade_map, "
        "parent_id, version) SELECT %s, %s, 'graded', %s, grade_map, testset_id, %s "
        "FROM pgeval.testset WHERE testset_id = %s RETURNING testset_id",
        (name, digest, path, version, parent),
    ).fetchone()[0]
    cur.execute(
        "INSERT INTO pgeval.query (testset_id, query_id, position, query_text, types, answerable, "
        "expected_facts, embedding) SELECT %s, query_id, position, query_text, types, answerable, "
        "expected_facts, embedding FROM pgeval.query WHERE testset_id = %s",
        (tid, parent),
    )
    n_queries = cur.rowcount
    cur.execute(
        "INSERT INTO pgeval.query_embedding (testset_id, query_id, embedder, dim, embedding) "
        "SELECT %s, query_id, embedder, dim, embedding FROM pgeval.query_embedding "
        "WHERE testset_id = %s",
        (tid, parent),
    )
    cur.execute(
        "INSERT INTO pgeval.qrel (testset_id, query_id, chunk_id, grade, source_grade, source) "
        "SELECT %s, query_id, chunk_id, grade, source_grade, source FROM pgeval.qrel "
        f"WHERE testset_id = %s UNION ALL SELECT %s, query_id, chunk_id, grade, NULL, source "
        f"FROM {STAGE} WHERE grade IS NOT NULL",
        (tid, parent, tid),
    )
    n = cur.rowcount
    finish(cur, tid, n_queries, n)
    return name, tid, version, n, False
