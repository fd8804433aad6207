"""Reading metrics. Every number comes from the SQL functions in ``sql/`` (pgeval.per_query,
pgeval.summary, pgeval.run_counts, pgeval.by_type, pgeval.flagged, pgeval.acceptance); this module
only resolves names, pivots rows and applies the reporting rules (warnings, refusals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.db import dict_rows
from ..core.errors import IncompleteRun, InputError, PgevalError, first_line, param
from . import measures, stage_method
from .measures import judged_at, judged_warning, with_judged
from .run_lookup import no_such_run

if TYPE_CHECKING:
    pass

MIN_VALID_QUERIES = 200
MAX_K = measures.MAX_K
measures_for = measures.measures_for  # the default list lives in the registry


@dataclass
class RunInfo:
    run_id: int
    name: str
    testset_id: int
    testset: str
    testset_hash: str
    stage: str
    status: str
    order_rule: str
    repetition: int
    experiment: str | None
    config_hash: str | None
    timing_boundary: str | None
    params: dict


def resolve_run(conn: Any, name: str) -> RunInfo:
    row = conn.execute(
        """SELECT r.run_id, r.name, r.testset_id, t.name, t.content_hash, r.stage, r.status,
                  r.order_rule, r.repetition, e.name, r.config_hash, r.timing_boundary, r.params
             FROM pgeval.run r JOIN pgeval.testset t USING (testset_id)
             LEFT JOIN pgeval.experiment e USING (experiment_id)
            WHERE r.name = %s""",
        (name,),
    ).fetchone()
    if row is None:
        raise no_such_run(conn, name)
    return RunInfo(*row)


@dataclass
class Evaluation:
    run: RunInfo
    measures: list[str]
    rel: int
    summary: dict[str, float | None]
    levels: dict[str, str | None]
    counts: dict[str, int]
    domain_discount: float = 0.0
    per_query: list[dict] | None = None
    by_type: list[dict] | None = None
    flagged: list[dict] | None = None
    warnings: list[str] = field(default_factory=list)
    plans: list[dict] | None = None  # flagged queries with their stored plans (--plans)
    judged_only: bool = False  # each list measured on its judged chunks only (trec_eval -J)

    def as_dict(self) -> dict:
        return {
            "run": self.run.name,
            "testset": self.run.testset,
            "stage": self.run.stage,
            "stage_label": stage_method.label(self.run.stage, self.run.stage, self.run.params),
            "status": self.run.status,
            "config_hash": self.run.config_hash,
            "order_rule": self.run.order_rule,
            "rel": self.rel,
            "judged_only": self.judged_only,
            "domain_discount": self.domain_discount,
            "counts": self.counts,
            "summary": self.summary,
            "acceptance": self.levels,
            "warnings": self.warnings,
            **({"per_query": self.per_query} if self.per_query is not None else {}),
            **({"by_type": self.by_type} if self.by_type is not None else {}),
            **({"flagged": self.flagged} if self.flagged is not None else {}),
            **({"plans": self.plans} if self.plans is not None else {}),
        }


def _measured(conn: Any, statement: str, args: tuple) -> list[tuple]:
    """The rows of a statement over a list of measures; an unknown measure (the SQL function's
    InvalidParameterValue) as an InputError on ``measures``."""
    import psycopg

    try:
        return conn.execute(statement, args).fetchall()
    except psycopg.errors.InvalidParameterValue as exc:
        raise InputError(first_line(exc, "invalid measure"), field="measures") from None


def per_query(
    conn: Any, run_id: int, measures: list[str], rel: int = 1, judged_only: bool = False
) -> list[dict]:
    """One dict per valid query: ``{"query_id": ..., "recall@3": ..., ...}`` in measure order;
    ``judged_only``: each list measured on its judged chunks only (trec_eval's -J)."""
    rows = _measured(
        conn,
        "SELECT query_id, measure, value FROM pgeval.per_query(%s, %s, %s, %s) "
        'ORDER BY query_id COLLATE "C", ord',
        (run_id, measures, rel, judged_only),
    )
    out: dict[str, dict] = {}
    for qid, measure, value in rows:
        out.setdefault(qid, {"query_id": qid})[measure] = value
    return list(out.values())


def summary(
    conn: Any, run_id: int, measures: list[str], rel: int = 1, judged_only: bool = False
) -> dict[str, float | None]:
    rows = _measured(
        conn,
        "SELECT measure, value FROM pgeval.summary(%s, %s, %s, %s)",
        (run_id, measures, rel, judged_only),
    )
    return {m: v for m, v in rows}


def counts(conn: Any, run_id: int, rel: int = 1, min_score: float | None = None) -> dict[str, int]:
    return dict_rows(conn, "SELECT * FROM pgeval.run_counts(%s, %s, %s)", (run_id, rel, min_score))[
        0
    ]


def levels(conn: Any, values: dict[str, float | None], domain_discount: float = 0.0) -> dict:
    import psycopg

    if not values:
        return {}
    try:
        rows = conn.execute(
            "SELECT m, pgeval.acceptance(m, v, %s) FROM unnest(%s::text[], %s::float8[]) AS u(m, v)",
            (domain_discount, list(values), list(values.values())),
        ).fetchall()
    except psycopg.errors.InvalidParameterValue as exc:
        raise InputError(first_line(exc), field=param("domain_discount")) from None
    return {m: lvl for m, lvl in rows if lvl is not None}


def by_type(
    conn: Any, run_id: int, measures: list[str], rel: int = 1, judged_only: bool = False
) -> list[dict]:
    rows = conn.execute(
        "SELECT query_type, measure, value, n_valid FROM pgeval.by_type(%s, %s, %s, %s)",
        (run_id, measures, rel, judged_only),
    ).fetchall()
    out: dict[str, dict] = {}
    for qtype, measure, value, n in rows:
        out.setdefault(qtype, {"type": qtype, "queries": n})[measure] = value
    return list(out.values())


def flagged(
    conn: Any, run_id: int, measures: list[str], rel: int = 1, judged_only: bool = False
) -> list[dict]:
    return dict_rows(
        conn,
        "SELECT query_id, flag, measure, value FROM pgeval.flagged(%s, %s, %s, %s)",
        (run_id, measures, rel, judged_only),
    )


def evaluate(
    conn: Any,
    run_name: str,
    measures: list[str] | None = None,
    *,
    rel: int = 1,
    domain_discount: float = 0.0,
    with_per_query: bool = False,
    with_by_type: bool = False,
    with_flagged: bool = False,
    strict: bool = False,
    allow_partial: bool = False,
    min_score: float | None = None,
    judged_only: bool = False,
) -> Evaluation:
    """Everything `pgeval metrics` shows for one run, read from the SQL API: ``measures`` and
    judged@K (:func:`.measures.with_judged`); ``judged_only``: each list measured on its judged
    chunks only (trec_eval's -J)."""
    if rel < 1 or rel > 3:
        raise InputError(f"relevance threshold must be 1, 2 or 3, got {rel}", field=param("rel"))
    measures = with_judged(measures or measures_for())
    run = resolve_run(conn, run_name)
    warnings: list[str] = []
    if run.status != "complete":
        if not allow_partial:
            raise IncompleteRun(
                f"run '{run.name}' is {run.status}, not complete: its numbers "
                f"would be wrong (`pgeval run resume` it, or {param('allow_partial', True)} to "
                "see them labelled)"
            )
        warnings.append(
            f"PARTIAL: run '{run.name}' is {run.status}; figures cover only the "
            "queries it has finished"
        )
    c = counts(conn, run.run_id, rel, min_score)
    if c["valid"] == 0:
        raise PgevalError(
            f"test set '{run.testset}' has no valid query (none has a chunk of "
            f"grade >= {rel}): no metric can be computed"
        )
    if c["valid"] < MIN_VALID_QUERIES:
        text = (
            f"only {c['valid']} valid queries (< {MIN_VALID_QUERIES}): the figures are not "
            "statistically meaningful"
        )
        if strict:
            raise PgevalError(text + f" ({param('strict', True)})")
        warnings.append(text)
    if c["no_result"]:
        warnings.append(f"{c['no_result']} valid queries have no result in this run and score 0")
    failed = conn.execute(
        "SELECT count(*), min(query_id) FROM pgeval.query_failure WHERE run_id = %s", (run.run_id,)
    ).fetchone()
    if failed[0]:  # a live service stage (stages/service.py) got no answer for them
        warnings.append(
            f"{failed[0]} queries got no answer from the service (first: "
            f"'{failed[1]}'; recorded in pgeval.query_failure) and count as empty "
            "lists"
        )
    values = summary(conn, run.run_id, measures, rel, judged_only)
    judged = judged_at(measures)
    low = judged_warning(judged, values.get(judged), judged_only)
    warnings += [low] if low else []
    scope = (run.run_id, measures, rel, judged_only)
    return Evaluation(
        run=run,
        measures=measures,
        rel=rel,
        summary=values,
        levels=levels(conn, values, domain_discount),
        counts=c,
        domain_discount=domain_discount,
        per_query=per_query(conn, *scope) if with_per_query else None,
        by_type=by_type(conn, *scope) if with_by_type else None,
        flagged=flagged(conn, *scope) if with_flagged else None,
        warnings=warnings,
        judged_only=judged_only,
    )
