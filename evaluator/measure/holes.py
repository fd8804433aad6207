"""The holes of a pool: the chunks of an experiment's top K (every stage, every repetition) that
the test set never judged, read from SQL (``pgeval.pool``), with the query's and the chunk's text
for the people who will grade them; written as a CSV file a spreadsheet opens safely
(:mod:`evaluator.core.spreadsheet`) and ``pgeval testset grade`` reads back
(:mod:`evaluator.testset.versions`).

With a model judge (:mod:`evaluator.providers.judge`), the judge grades the holes and the chunks
of the same pool people graded; its grades are stored apart (``pgeval.model_grade``) and its
agreement with the people's is measured in SQL (:mod:`evaluator.testset.judging`). Nothing is
stored and no file written unless the judge graded every chunk (docs/judging.md)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, param
from ..core.install import ensure_installed
from ..core.spreadsheet import cell
from ..testset import judging
from ..testset.versions import POOL_COLUMNS
from .stage_report import resolve_experiment

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..core.db import Database
    from ..providers.judge import ChatJudge


@dataclass(frozen=True)
class Pooled:
    """One chunk of a query's pool: ``grade`` None for a hole."""

    query_id: str
    query: str
    chunk_id: str
    chunk: str
    grade: int | None
    best_rank: int
    seen_at: tuple[str, ...]  # 'stage:rank', best first

    def as_dict(self) -> dict:
        return {
            "query_id": self.query_id,
            "chunk_id": self.chunk_id,
            "best_rank": self.best_rank,
            "seen_at": list(self.seen_at),
        }


@dataclass(frozen=True)
class HolesReport:
    experiment: str
    testset: str
    depth: int
    pooled: int  # distinct (query, chunk) in the top ``depth`` of every list
    holes: tuple[Pooled, ...]
    out: str
    chunk_text: bool  # the target gave the chunks' text
    agreement: judging.Agreement | None = None  # with a judge: against the people's grades
    model_graded: int = 0  # holes the judge graded (stored apart)

    def as_dict(self) -> dict:
        return {
            "experiment": self.experiment,
            "testset": self.testset,
            "depth": self.depth,
            "pooled": self.pooled,
            "holes": len(self.holes),
            "queries": len({h.query_id for h in self.holes}),
            "out": self.out,
            "chunk_text": self.chunk_text,
            "agreement": None if self.agreement is None else self.agreement.as_dict(),
            "model_graded": self.model_graded,
            "rows": [h.as_dict() for h in self.holes],
        }


def holes(
    database: Database,
    experiment: str,
    depth: int,
    out: str | Path,
    judge: ChatJudge | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> HolesReport:
    """The holes of ``experiment``'s top ``depth``, written to ``out`` (see the module);
    ``on_progress(done, total)`` as the judge grades."""
    if not isinstance(depth, int) or depth < 1:
        raise InputError(
            f"the depth must be a whole number >= 1, not {depth!r}", field=param("depth")
        )
    with database.connect(autocommit=True) as conn:
        ensure_installed(conn)  # schema pgeval at this pgeval's revision (pgeval.pool)
        exp = resolve_experiment(conn, experiment)
        tid, target = conn.execute(
            "SELECT testset_id, target FROM pgeval.experiment WHERE experiment_id = %s",
            (exp.experiment_id,),
        ).fetchone()
        rows = conn.execute(
            "SELECT p.query_id, coalesce(q.query_text, ''), p.chunk_id, p.grade, p.best_rank, "
            "p.seen_at FROM pgeval.pool(%s, %s) WITH ORDINALITY "
            "AS p(query_id, chunk_id, grade, best_rank, seen_at, n) JOIN pgeval.query q "
            "ON q.testset_id = %s AND q.query_id = p.query_id ORDER BY p.n",
            (exp.experiment_id, depth, tid),
        ).fetchall()
        texts = _chunk_texts(conn, database, target, {r[2] for r in rows})
        pool = [
            Pooled(q, qt, c, (texts or {}).get(c, ""), g, rank, tuple(seen))
            for q, qt, c, g, rank, seen in rows
        ]
        found = [p for p in pool if p.grade is None]
        agreement, graded = None, 0
        if judge is not None:
            agreement, graded = _judge(conn, tid, judge, pool, texts is not None, on_progress)
    _write_csv(Path(out), exp.testset, found)
    return HolesReport(
        exp.name,
        exp.testset,
        depth,
        len(pool),
        tuple(found),
        str(out),
        texts is not None,
        agreement,
        graded,
    )


def _chunk_texts(
    conn: Any, database: Database, target: str | None, ids: set[str]
) -> dict[str, str] | None:
    """chunk id -> text from the experiment's target; None when it has no text column."""
    from ..stages import rerank_sql
    from ..targets.targets import load

    if target is None:
        return None
    t = load(conn, target)
    if not t.text_column:
        return None
    if not ids:
        return {}
    with database.connect(results=False, read_only=True) as kb:
        id_type = rerank_sql.columns(kb, t)[t.id_column][1]
        stmt, params = rerank_sql.texts(t, t.text_column, id_type)
        rows = kb.execute(stmt, {**params, "ids": sorted(ids)}).fetchall()
        kb.rollback()
    return {str(c): "" if text is None else str(text) for c, text in rows}


def _judge(
    conn: Any,
    tid: int,
    judge: ChatJudge,
    pool: list[Pooled],
    with_text: bool,
    on_progress: Callable[[int, int], None] | None,
) -> tuple[judging.Agreement, int]:
    """The judge's grades of the pool's holes and of the chunks people graded in it (``judge
    .concurrency`` requests at a time), stored in one transaction once all are in; its agreement
    with the people's grades."""
    from concurrent.futures import ThreadPoolExecutor

    if not with_text:
        raise InputError(
            "a judge needs the chunks' text: give the experiment's target a text column "
            f"(`pgeval target add ... {param('text_column')} COLUMN --replace`)",
            field=param("judge"),
        )

    def one(p: Pooled) -> tuple[str, str, int]:
        what = f"query '{p.query_id}' chunk '{p.chunk_id}'"
        return p.query_id, p.chunk_id, judge.grade(p.query, p.chunk, what)

    grades = []
    pool_ex = ThreadPoolExecutor(max_workers=judge.concurrency)
    try:
        for grade in pool_ex.map(one, pool):  # in order: progress reported from this thread
            grades.append(grade)
            if on_progress is not None:
                on_progress(len(grades), len(pool))
    finally:  # the first failure stops the requests not yet sent
        pool_ex.shutdown(wait=True, cancel_futures=True)
    with conn.transaction():
        judging.store(conn, tid, judge.label, grades)
    holes = sum(1 for p in pool if p.grade is None)
    return judging.agreement(conn, tid, judge.label), holes


def _write_csv(path: Path, testset: str, found: list[Pooled]) -> None:
    """The pool file, whole or not at all (written beside ``path``, then renamed over it), with
    a byte-order mark so that spreadsheets read it as UTF-8."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8-sig", newline="") as f:
            w = csv.writer(f, lineterminator="\r\n")
            w.writerow(POOL_COLUMNS)
            w.writerows(
                map(
                    cell,
                    (testset, h.query_id, h.query, h.chunk_id, h.chunk, " ".join(h.seen_at), ""),
                )
                for h in found
            )
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc.strerror}", file=str(path)) from None
