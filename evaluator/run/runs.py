"""Runs produced elsewhere: import (TREC run files, JSONL ranked lists), export, list, delete.

Import parses the file (TREC: :mod:`evaluator.run.trec_lines`), checks and ranks each query's list
while reading it (:mod:`evaluator.run.ranked_lists`) and writes one pgeval.result_list row per
query by COPY, all in one transaction: a rejected file leaves nothing behind.

Order rules (METRICS.md): TREC lines are ranked by score descending, ties by chunk id descending
in byte order (the trec_eval rule, whatever the database's collation; the file's own rank column
is ignored). JSONL keeps the given order.

Ids follow the one rule of :func:`evaluator.core.ids.ident` (surrounding whitespace removed, as the
test set loader does). A TREC score is read only when it is a plain decimal number, which C's
``atof`` (trec_eval) and pgeval read alike; anything else (``1_0``, Arabic-Indic or full-width
digits, hex) is refused with file, line and field rather than read differently from trec_eval.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import psycopg

from ..core import strict_json
from ..core.db import Database, dict_rows
from ..core.errors import Conflict, IncompleteRun, InputError, param
from ..measure.run_lookup import no_such_run
from ..testset.catalog import resolve_testset
from ..testset.source import Source
from . import ranked_lists, score_direction
from .experiment_scope import client_gone
from .trec_lines import line_id as _id
from .trec_lines import trec_segments

TREC_ORDER = "score descending, ties by chunk id descending (trec_eval rule)"
JSONL_ORDER = "as given in the file"
FORMATS = ("trec", "jsonl")
_BATCH = 1 << 16  # rows read between two progress reports (never one per row)


@dataclass
class ImportReport:
    name: str
    run_id: int
    testset: str
    rows: int
    queries: int
    unknown_queries: int
    unknown_query_ids: list[str] = field(default_factory=list)
    valid_without_result: int = 0
    lines_with_extra_text: int = 0  # TREC lines with text after the sixth field (ignored)
    score: str | None = None  # distance, similarity, rank; None: unknown (score_direction)


def guess_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "trec"


def _jsonl_object(line: str, path: Path, lineno: int) -> dict:
    try:
        obj = strict_json.loads(line)
    except strict_json.DuplicateKey as exc:
        raise InputError(str(exc), file=str(path), line=lineno, field=exc.field) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", file=str(path), line=lineno) from None
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", file=str(path), line=lineno)
    return obj


def _jsonl_item(item: object, pos: int, path: Path, lineno: int) -> tuple[str, float | None]:
    """(chunk id, score or None) of item ``pos`` of a ranked list: an id, or
    ``{chunk_id, score}``."""
    score = None
    if isinstance(item, dict):
        chunk, score = item.get("chunk_id"), item.get("score")
    else:
        chunk = item
    if chunk is None or chunk == "":
        raise InputError(f"item {pos} has no chunk_id", file=str(path), line=lineno, field="ranked")
    chunk = _id(chunk, f"item {pos} chunk id", path, lineno, "ranked")
    if score is not None:
        try:
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise ValueError
            score = float(score)  # OverflowError: an integer beyond float8
            if math.isnan(score):
                raise ValueError
        except (ValueError, OverflowError):
            raise InputError(
                f"item {pos} score is not a number",
                file=str(path),
                line=lineno,
                field="ranked",
            ) from None
    return chunk, score


def _jsonl_segments(
    path: Path, src: Source | None = None, direction: score_direction.Direction | None = None
) -> Iterator[Any]:
    """Yield one segment (query ids, chunk ids, scores or None, line numbers) a line of a JSONL
    ranked-list file. A query is on one line: a second line of the same query is refused (never
    two lists joined). An item refused is refused after the items before it are handed out (a
    chunk listed twice among them is the first error, in file order). ``direction`` reads each
    line's ``"score"`` key and the way its scores go."""
    direction = direction or score_direction.Direction(path)
    seen: dict[str, int] = {}
    for lineno, line in src or Source(path):  # UTF-8 checked per line
        if not line.strip():
            continue
        obj = _jsonl_object(line, path, lineno)
        qid = obj.get("query_id")
        if qid is None or qid == "":
            raise InputError(
                "missing or empty query id", file=str(path), line=lineno, field="query_id"
            )
        qid = _id(qid, "query id", path, lineno, "query_id")
        if qid in seen:
            raise InputError(
                f"query '{qid}' already has its ranked list on line {seen[qid]} "
                "(one line per query)",
                file=str(path),
                line=lineno,
                field="query_id",
            )
        seen[qid] = lineno
        direction.declare(obj.get("score"), lineno)
        ranked = obj.get("ranked")
        if not isinstance(ranked, list):
            raise InputError(
                "expected a list of {chunk_id, score}", file=str(path), line=lineno, field="ranked"
            )
        chunks: list[str] = []
        scores: list[float | None] = []
        try:
            for pos, item in enumerate(ranked, 1):
                chunk, score = _jsonl_item(item, pos, path, lineno)
                chunks.append(chunk)
                scores.append(score)
        except InputError:
            if chunks:
                yield [qid] * len(chunks), chunks, scores, [lineno] * len(chunks)
            raise
        direction.observe(scores, lineno)
        if chunks:
            yield [qid] * len(chunks), chunks, scores, [lineno] * len(chunks)


def _reporting(
    segments: Iterator[tuple],
    src: Source,
    on_progress: Callable[..., Any] | None,
    reported: list[int],
) -> Iterator[Any]:
    """``segments`` of ``src``, calling ``on_progress(bytes_read, size, "reading")`` once for
    every ``_BATCH`` rows handed out (never per row) and ``(size, size, "ranking")`` when the file
    is read (the last lists are then ranked and stored). ``reported[0]``: the bytes reported by
    an earlier read of the file (interleaved queries are read twice); this read reports only past
    them, so the bar never goes back."""
    floor = reported[0]
    n = 0
    for seg in segments:
        yield seg
        before, n = n, n + len(seg[0])
        if on_progress:
            for _ in range(n // _BATCH - before // _BATCH):
                done = src.bytes_read
                if done > floor:
                    reported[0] = max(reported[0], done)
                    on_progress(done, src.size, "reading")
    if on_progress:
        on_progress(src.size, src.size, "ranking")


def _segments(
    fmt: str, path: Path, src: Source, extra: list[int], direction: score_direction.Direction
) -> Iterator[Any]:
    """The file's segments: TREC (``extra`` counts lines with text after the sixth field) or
    JSONL (``direction`` reads which way the scores point)."""
    if fmt == "trec":
        return trec_segments(path, extra, src)
    return _jsonl_segments(path, src, direction)


def _insert_run(
    conn: Any, name: str, testset_id: int, params: dict, fmt: str, replace: bool
) -> int:
    """The imported run's row (complete; its lists follow in the same transaction)."""
    try:
        return conn.execute(
            "INSERT INTO pgeval.run (name, testset_id, stage, params, order_rule, status, "
            "n_unknown_queries, finished_at) VALUES (%s, %s, 'import', %s, %s, 'complete', "
            "%s, now()) RETURNING run_id",
            (
                name,
                testset_id,
                json.dumps(params),
                TREC_ORDER if fmt == "trec" else JSONL_ORDER,
                0,
            ),
        ).fetchone()[0]
    except psycopg.errors.UniqueViolation:  # a concurrent import took the name meanwhile
        if replace:  # it wrote the run after this import deleted the one it saw
            raise Conflict(
                f"another session wrote run '{name}' at the same time as this "
                "import (a concurrent `run import --replace` or pipeline); this "
                "import stored nothing: retry it to replace that run"
            ) from None
        raise Conflict(
            f"a run named '{name}' was created by another session meanwhile (use "
            f"{param('replace', True)} or another {param('name')})"
        ) from None


def import_run(
    conn: Any,
    path: Any,
    testset: str,
    name: str,
    fmt: str | None = None,
    *,
    replace: bool = False,
    tag: str | None = None,
    on_progress: Callable[..., None] | None = None,
    score: str | None = None,
) -> ImportReport:
    """Import a ranked-list file as run ``name`` over test set ``testset`` (one transaction).
    ``score``: distance or similarity (None: the file's, :mod:`evaluator.run.score_direction`).

    ``on_progress(bytes_done, bytes_total, phase)`` is called once a batch of lines
    (``_BATCH``) while the file is read (phase ``"reading"``; bytes of the file, compressed
    size for .gz), then with ``bytes_done == bytes_total`` and phase ``"ranking"`` once the file
    is read (lists are ranked and stored as they are read; the last ones remain)."""
    path = Path(path)
    if not name or not name.strip():
        raise InputError("the run name must not be empty", field=param("name"))
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown run format '{fmt}' (use trec or jsonl)", field=param("format"))
    score_direction.check_given(score, fmt)
    testset_id, _ = resolve_testset(conn, testset)
    with conn.transaction():
        existing = conn.execute("SELECT run_id FROM pgeval.run WHERE name = %s", (name,)).fetchone()
        if existing is not None:
            if not replace:
                raise Conflict(
                    f"a run named '{name}' exists (use {param('replace', True)} or another {param('name')})"
                )
            conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", existing)
        judgements = ranked_lists.Judgements(conn, testset_id)  # read while the file is parsed
        params = {"source": str(path), "format": fmt, "tag": tag}
        run_id = _insert_run(conn, name, testset_id, params, fmt, replace)
        extra = [0]  # TREC lines with text after the sixth field (counted on the last read)

        reported = [0]  # bytes reported so far: a second read reports only past them
        direction = [score_direction.Direction(path, given=score)]  # anew on each read

        def rows() -> Any:
            extra[0], src = 0, Source(path)
            direction[0] = score_direction.Direction(path, given=score)
            read = _segments(fmt, path, src, extra, direction[0])
            return _reporting(read, src, on_progress, reported)

        def copy(lists: Any) -> Any:
            return ranked_lists.copy_lists(
                conn, run_id, lists, by_score=fmt == "trec", judgements=judgements
            )

        try:
            with conn.transaction():  # a file grouped by query: streamed, constant memory
                copied = copy(ranked_lists.streamed(rows(), path))
        except ranked_lists.Interleaved:  # queries interleaved: read again, grouped in memory
            copied = copy(ranked_lists.grouped(rows(), path))
        if copied.rows == 0:
            raise InputError("empty file: no ranked results", file=str(path))
        unknown_ids = sorted(copied.unknown)
        way = _score_direction(fmt, direction[0], copied.minus_ranks)
        conn.execute(
            "UPDATE pgeval.run SET n_unknown_queries = %s, params = params || "
            "jsonb_strip_nulls(jsonb_build_object('score', %s::text)) WHERE run_id = %s",
            (len(unknown_ids), way, run_id),
        )
        if copied.results == 0:  # every query id unknown: another test set's run, never 0s
            raise InputError(
                f"none of the {len(unknown_ids)} query ids in the file is in test set "
                f"'{testset}' (first: '{unknown_ids[0]}'): is it a run of another test "
                "set?",
                file=str(path),
            )
        missing = conn.execute("SELECT no_result FROM pgeval.run_counts(%s)", (run_id,)).fetchone()[
            0
        ]
    return ImportReport(
        name=name,
        run_id=run_id,
        testset=testset,
        rows=copied.results,
        queries=copied.lists,
        unknown_queries=len(unknown_ids),
        unknown_query_ids=unknown_ids[:20],
        valid_without_result=missing,
        lines_with_extra_text=extra[0],
        score=way,
    )


def _score_direction(
    fmt: str, direction: score_direction.Direction, minus_ranks: bool
) -> str | None:
    """The imported run's score direction: a TREC file's is similarity (trec_eval's rule) or,
    when every score stored is minus its rank (``minus_ranks``), rank; a JSONL file's as
    :meth:`Direction.decided`."""
    if fmt != "trec":
        return direction.decided()
    if direction.given:
        return direction.given
    return "rank" if minus_ranks else "similarity"


def export_run(
    conn: Any, name: str, fmt: str, out: Any, on_note: Callable[[str], Any] | None = None
) -> int:
    """Write run ``name`` to the text stream ``out`` as TREC or JSONL; return lines written.
    A JSONL line says which way the scores point (``"score"``: the run's, when known); a TREC
    file cannot (a comment is no TREC line): when its scores are ranks (-rank), ``on_note``
    is told so, and `run import` of the file marks them as ranks."""
    from ..measure.metrics import resolve_run

    if fmt not in FORMATS:
        raise InputError(f"unknown run format '{fmt}' (use trec or jsonl)", field=param("format"))
    run = resolve_run(conn, name)
    if run.status != "complete":
        # a run still being written (or interrupted) would read back as a complete run
        raise IncompleteRun(
            f"run '{run.name}' is {run.status}, not complete: an export would "
            "read back as a complete run (`pgeval run resume` it first)"
        )
    cur = conn.execute(
        "SELECT query_id, rank, chunk_id, score FROM pgeval.result WHERE run_id = %s "
        "ORDER BY query_id, rank",
        (run.run_id,),
    )
    lines = 0
    tag = "".join(ch if ch.isalnum() or ch in "-_.:" else "_" for ch in name) or "run"
    way = run.params.get("score") if run.params.get("score") in score_direction.STORED else None
    if fmt == "trec":
        # TREC readers re-sort by score: keep the stored scores only when they reproduce the
        # stored order (runs imported from TREC); otherwise write -rank, which does.
        keep = run.order_rule == TREC_ORDER
        if on_note and (not keep or way == "rank"):
            on_note(
                f"the scores of run '{run.name}' are written as -rank (its order; TREC readers "
                "sort by score): score fusion over the file would fuse ranks, so `pgeval run "
                "import` marks them as ranks (rrf only)"
            )
        for qid, rank, chunk, score in cur:
            value = repr(score) if keep and score is not None else str(-rank)
            out.write(f"{qid} Q0 {chunk} {rank} {value} {tag}\n")
            lines += 1
        return lines
    said = {"score": way} if way else {}
    for qid, rows in groupby(cur, key=itemgetter(0)):
        ranked = [{"chunk_id": chunk, "score": score} for _, _, chunk, score in rows]
        out.write(json.dumps({"query_id": qid, **said, "ranked": ranked}, ensure_ascii=False))
        out.write("\n")
        lines += 1
    return lines


def list_runs(conn: Any, testset: str | None = None, experiment: str | None = None) -> list[dict]:
    """The stored runs, each with its status as a reader needs it: ``complete``; ``failed``
    (the stage raised); ``interrupted`` (stopped by Ctrl-C, or still marked running although
    the process that wrote it, on this host, is gone: `pgeval run resume` continues it);
    ``running`` (being written, or by a process of another host)."""
    found = dict_rows(
        conn,
        """SELECT r.name AS run, t.name AS testset, r.stage, e.name AS experiment, r.repetition,
                  CASE WHEN r.status = 'failed' AND r.params ->> 'stopped' = 'interrupted'
                       THEN 'interrupted' ELSE r.status END AS status,
                  r.n_queries AS queries,
                  r.config_hash, r.started_at, r.pid, r.host
             FROM pgeval.run r JOIN pgeval.testset t USING (testset_id)
             LEFT JOIN pgeval.experiment e USING (experiment_id)
            WHERE (%(t)s::text IS NULL OR t.name = %(t)s) AND (%(e)s::text IS NULL OR e.name = %(e)s)
            ORDER BY r.run_id""",
        {"t": testset, "e": experiment},
    )
    rows = []
    for row in found:
        pid, host = row.pop("pid"), row.pop("host")
        if row["status"] == "running" and client_gone(pid, host):
            row["status"] = "interrupted"
        rows.append(row)
    return rows


def delete_run(conn: Any, name: str) -> tuple[str, bool] | None:
    """Delete run ``name`` and its results (one transaction). A run of an experiment leaves that
    experiment incomplete: it is marked ``failed`` (stage-report refuses it; `pgeval run resume`
    measures the stage again), and a sweep point measured by the run is removed from its sweeps,
    which are marked ``interrupted`` (running the sweep again measures it anew). Returns
    (experiment name, whether it is a sweep), or None for a run of no experiment."""
    with conn.transaction():
        row = conn.execute(
            "SELECT r.run_id, e.experiment_id, e.name, e.config ? 'sweep' FROM pgeval.run r "
            "LEFT JOIN "
            "pgeval.experiment e USING (experiment_id) WHERE r.name = %s FOR UPDATE OF r",
            (name,),
        ).fetchone()
        if row is None:
            raise no_such_run(conn, name)
        run_id, exp_id, exp_name, is_sweep = row
        sweeps = [
            r[0]
            for r in conn.execute(
                "DELETE FROM pgeval.sweep_point WHERE run_id = %s RETURNING sweep_id", (run_id,)
            ).fetchall()
        ]
        if sweeps:
            conn.execute(
                "UPDATE pgeval.sweep SET status = 'interrupted' WHERE sweep_id = "
                "ANY(%s) AND status <> 'running'",
                (sorted(set(sweeps)),),
            )
        conn.execute("DELETE FROM pgeval.run WHERE run_id = %s", (run_id,))
        if exp_id is not None:
            conn.execute(
                "UPDATE pgeval.experiment SET status = 'failed', finished_at = "
                "coalesce(finished_at, now()) WHERE experiment_id = %s "
                "AND status <> 'running'",
                (exp_id,),
            )
    return None if exp_id is None else (exp_name, bool(is_sweep))


def delete_experiment(conn: Any, experiment: str) -> dict:
    """Delete experiment ``experiment`` with every run of it and their results (one
    transaction); a sweep that measured one of its runs loses that point and is marked
    ``interrupted``, as :func:`delete_run` does. Refused while a run of it is being written."""
    with conn.transaction():
        row = conn.execute(
            "SELECT experiment_id FROM pgeval.experiment WHERE name = %s FOR UPDATE",
            (experiment,),
        ).fetchone()
        if row is None:
            raise InputError(f"no experiment named '{experiment}'", field=param("experiment"))
        runs = conn.execute(
            "SELECT run_id, name, status, pid, host FROM pgeval.run WHERE experiment_id = %s "
            "ORDER BY run_id FOR UPDATE",
            row,
        ).fetchall()
        busy = [r[1] for r in runs if r[2] == "running" and not client_gone(r[3], r[4])]
        if busy:
            raise Conflict(
                f"run '{busy[0]}' of experiment '{experiment}' is being written: stop it first"
            )
        ids = [r[0] for r in runs]
        sweeps = conn.execute(
            "WITH d AS (DELETE FROM pgeval.sweep_point WHERE run_id = ANY(%s) "
            "RETURNING sweep_id) UPDATE pgeval.sweep SET status = 'interrupted' "
            "WHERE sweep_id IN (SELECT sweep_id FROM d) AND status <> 'running' RETURNING name",
            (ids,),
        ).fetchall()
        conn.execute("DELETE FROM pgeval.experiment WHERE experiment_id = %s", row)
    return {
        "experiment": experiment,
        "runs": [r[1] for r in runs],
        "sweeps_interrupted": sorted(s[0] for s in sweeps),
    }


def export_to(
    database: Database,
    name: str,
    fmt: str = "trec",
    out: str | None = None,
    stream: Any = None,
    on_note: Callable[[str], Any] | None = None,
) -> int:
    """Export run ``name`` as one snapshot saw it (whatever happens meanwhile): to the file
    ``out``, atomically (written to ``out.part``, renamed when complete: nothing half-written),
    else to the text ``stream``. Returns the lines written; ``on_note`` as :func:`export_run`."""
    from ..core.db import snapshot

    with snapshot(database) as conn:
        if not out:
            return export_run(conn, name, fmt, stream, on_note)
        tmp = out + ".part"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                n = export_run(conn, name, fmt, fh, on_note)
            os.replace(tmp, out)
        except BaseException as exc:
            if os.path.exists(tmp):
                os.remove(tmp)
            if isinstance(exc, OSError) and exc.filename == tmp:
                raise InputError(f"cannot write there: {exc.strerror}", file=out) from None
            raise
    return n
