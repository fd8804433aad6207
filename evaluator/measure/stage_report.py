"""`pgeval stage-report`: the stages of one experiment side by side, where recall is lost, and
where the headroom is.

Every number comes from the SQL API (sql/100-160): pgeval.stage_summary (Recall/MRR/nDCG and
judged@K per stage, mean over repetitions with spread), pgeval.index_recall_summary (ANN stages
against exact search; the per-query distribution from :mod:`.recall_distribution`),
pgeval.stage_latency (nearest-rank percentiles, rows returned), pgeval.loss_chain,
pgeval.loss_summary, pgeval.loss_by_type and pgeval.loss_worst_queries (loss attribution),
pgeval.stage_ceilings and pgeval.stage_headroom (sql/125: each stage's candidates ordered by the
judgements, the index against exact search and a higher setting). This module resolves names,
checks the experiment, shapes the rows and puts the largest headroom in words; it computes
nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.db import dict_rows
from ..core.errors import IncompleteRun, InputError, NotFound, param
from . import stage_method
from .latency import PERCENTILES, percent
from .measures import judged_warning, stage_measures
from .metrics import MIN_VALID_QUERIES

if TYPE_CHECKING:
    from ..core.db import Database

CATEGORIES = {
    "index": "dropped by the ANN index: exact search had it, no path found it",
    "reach": "beyond reach: not even exact or keyword search found it (chunking, embedding, "
    "query wording)",
    "retrieval": "not retrieved by any path (no exact stage to tell index from reach)",
    "fusion": "a path had it, the merge cut it",
    "rerank": "handed to rerank, not in its top K",
    "kept": "in the final top K (the final Recall@K)",
}


@dataclass
class Experiment:
    experiment_id: int
    name: str
    testset: str
    status: str
    config: dict
    repetitions: list[int]


@dataclass
class StageReport:
    experiment: Experiment
    k: int
    rel: int
    repetition: int | None  # None: every repetition (means with spread)
    counts: dict
    stages: list[dict]
    worst_repetition: int
    chain: list[dict] = field(default_factory=list)
    loss: list[dict] = field(default_factory=list)
    loss_by_type: list[dict] = field(default_factory=list)
    worst: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    judged: bool = True  # the test set has graded judgements
    queries: dict | None = None  # a query-vector source (testset.query_source) when not
    headroom: list[dict] = field(default_factory=list)  # pgeval.stage_headroom, largest first
    advice: str | None = None  # the largest headroom in words (:func:`advice`)
    judged_only: bool = False  # each list measured on its judged chunks only (trec_eval -J)

    def as_dict(self) -> dict:
        e = self.experiment
        return {
            "experiment": e.name,
            "testset": e.testset,
            "status": e.status,
            "repetitions": e.repetitions,
            "repetition": "all" if self.repetition is None else self.repetition,
            "k": self.k,
            "rel": self.rel,
            "counts": self.counts,
            "stages": self.stages,
            "chain": self.chain,
            "loss_attribution": self.loss,
            "loss_by_type": self.loss_by_type,
            "worst_queries": {"repetition": self.worst_repetition, "queries": self.worst},
            "categories": {
                c: CATEGORIES[c] for c in CATEGORIES if any(r["category"] == c for r in self.loss)
            },
            "warnings": self.warnings,
            "judgements": self.judged,
            "queries": self.queries,
            "judged_only": self.judged_only,
            "headroom": self.headroom,
            "advice": self.advice,
        }


def resolve_experiment(conn: Any, name: str) -> Experiment:
    row = conn.execute(
        "SELECT e.experiment_id, e.name, t.name, e.status, e.config, ARRAY(SELECT DISTINCT "
        "repetition FROM pgeval.run r WHERE r.experiment_id = e.experiment_id ORDER BY 1) "
        "FROM pgeval.experiment e JOIN pgeval.testset t USING (testset_id) WHERE e.name = %s",
        (name,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no experiment named '{name}' (see `pgeval run list`)")
    if not row[5]:
        raise NotFound(f"experiment '{name}' has no run yet")
    return Experiment(row[0], row[1], row[2], row[3], row[4] or {}, list(row[5]))


def missing_runs(conn: Any, exp: Experiment, repetition: int | None = None) -> list[str]:
    """The stage runs the experiment's configuration calls for that it does not hold (deleted,
    or never run): every stage of every repetition of a pipeline; exact search per repetition
    and every point measured by the sweep itself (not reused) of a sweep."""
    from ..stages.base import run_name

    cfg = exp.config or {}
    reps = [repetition] if repetition is not None else range(1, int(cfg.get("repeat") or 1) + 1)
    if "sweep" in cfg:
        points = conn.execute(
            "SELECT sp.label, sp.repetition, sp.run_id FROM pgeval.sweep s JOIN "
            "pgeval.sweep_point sp USING (sweep_id) WHERE s.experiment_id = %s AND "
            "sp.reused_from IS NULL AND (%s::int IS NULL OR sp.repetition = %s) "
            "ORDER BY sp.repetition, sp.point",
            (exp.experiment_id, repetition, repetition),
        ).fetchall()
        wanted = [run_name(exp.name, "exact", rep) for rep in sorted({p[1] for p in points})]
        wanted += [
            run_name(exp.name, label, rep) for label, rep, run_id in points if run_id is None
        ]
    elif cfg.get("stages") and all(isinstance(x, dict) for x in cfg["stages"]):
        wanted = [run_name(exp.name, x["name"], rep) for rep in reps for x in cfg["stages"]]
    else:  # an experiment without a recorded stage list: nothing to check against
        return []
    have = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM pgeval.run WHERE experiment_id = %s "
            "AND testset_id = (SELECT testset_id FROM "
            "pgeval.experiment WHERE experiment_id = %s)",
            (exp.experiment_id, exp.experiment_id),
        ).fetchall()
    }
    return [n for n in wanted if n not in have]


def parse_repetition(value: str | int | None) -> int | None:
    """'all' (or None) -> None; '2' -> 2."""
    if value is None or str(value).strip().lower() == "all":
        return None
    try:
        rep = int(str(value).strip())
    except ValueError:
        raise InputError(
            f"repetition must be a number or 'all', got {value!r}", field=param("repetition")
        ) from None
    if rep < 1:
        raise InputError(f"repetition must be >= 1, got {rep}", field=param("repetition"))
    return rep


COUNTS = ("chunks", "relevant", "valid_queries", "queries")  # of loss_summary / loss_by_type


# a stage's figures as the report names them -> the columns of the SQL function they come from
METRIC = {"mean": "value", "min": "value_min", "max": "value_max", "stddev": "value_stddev"}
INDEX_RECALL = {"mean": "index_recall", "min": "recall_min", "max": "recall_max"}
ROWS = {"mean": "rows_mean", "min": "rows_min", "max": "rows_max"}
HEADROOM_KEYS = ("ceiling", "actual", "headroom")  # of pgeval.stage_ceilings, stage_headroom


def _renamed(row: dict, names: dict[str, str], kept: tuple[str, ...] = ()) -> dict:
    """``row``'s columns under the names the report gives them (``names``: name -> column),
    then the ``kept`` columns under their own."""
    return {**{name: row[column] for name, column in names.items()}, **{k: row[k] for k in kept}}


def _whole_counts(rows: list[dict]) -> list[dict]:
    """The loss attribution's counts arrive as means over repetitions (double precision): an int
    when the mean is whole (always so for one repetition), the mean otherwise."""
    for r in rows:
        for key in COUNTS:
            v = r.get(key)
            if isinstance(v, float) and v.is_integer():
                r[key] = int(v)
    return rows


def _stage_metrics(
    conn: Any,
    exp: Experiment,
    measures: list[str],
    rel: int,
    repetition: int | None,
    params: dict,
    judged_only: bool = False,
) -> dict[str, dict]:
    """Label -> the stage's dict with its metrics (pgeval.stage_summary) and threshold."""
    out: dict[str, dict] = {}
    for r in dict_rows(
        conn,
        "SELECT * FROM pgeval.stage_summary(%s, %s, %s, %s, %s)",
        (exp.experiment_id, measures, rel, repetition, judged_only),
    ):
        p = params.get(r["label"], {})
        s = out.setdefault(
            r["label"],
            {
                "stage": r["label"],
                "kind": r["stage"],
                "label": stage_method.label(r["label"], r["stage"], p),
                "method": p.get("method"),
                "role": r["role"],
                "repetitions": r["repetitions"],
                "metrics": {},
            },
        )
        s["metrics"][r["measure"]] = _renamed(r, METRIC)
        if "threshold_dropped" in p and "threshold" not in s:  # the target's threshold
            s["threshold"] = {
                **p["threshold"],
                "dropped": p["threshold_dropped"],
                "queries": p.get("threshold_queries"),
                "dropped_max": p.get("threshold_dropped_max"),
            }
    return out


def _add_index_recall(
    conn: Any, exp: Experiment, k: int, repetition: int | None, out: dict[str, dict]
) -> None:
    from .recall_distribution import distribution

    spread = distribution(conn, exp.experiment_id, k, repetition)
    for r in dict_rows(
        conn,
        "SELECT * FROM pgeval.index_recall_summary(%s, %s, %s)",
        (exp.experiment_id, k, repetition),
    ):
        if r["label"] in out:
            out[r["label"]][f"index_recall@{k}"] = {
                **_renamed(r, INDEX_RECALL, ("queries", "short_queries")),
                # per query, not per repetition: p5, p10, min, the queries at 0, the misses
                "distribution": spread.get(r["label"]),
            }


def _add_latency(conn: Any, exp: Experiment, repetition: int | None, out: dict[str, dict]) -> None:
    for r in dict_rows(
        conn,
        "SELECT * FROM pgeval.stage_latency(%s, %s, %s)",
        (exp.experiment_id, repetition, list(PERCENTILES)),
    ):
        if r["label"] not in out:
            continue
        s = out[r["label"]]
        s["timing_boundary"] = r["timing_boundary"]
        s["latency_ms"] = (
            {f"p{percent(f)}": v for f, v in zip(PERCENTILES, r["latency_ms"])}
            if r["latency_ms"]
            else None
        )
        if r["server_ms"]:
            s["server_ms"] = {f"p{percent(f)}": v for f, v in zip(PERCENTILES, r["server_ms"])}
        s["timed_queries"] = r["timed_queries"]
        s["rows"] = _renamed(r, ROWS, ("depth", "short_queries"))


def _add_failures(conn: Any, exp: Experiment, repetition: int | None, out: dict[str, dict]) -> None:
    for r in dict_rows(
        conn, "SELECT * FROM pgeval.stage_failures(%s, %s)", (exp.experiment_id, repetition)
    ):  # live service stages
        if r["label"] in out:
            out[r["label"]]["failures"] = _renamed(
                r, {}, ("queries", "failed", "by_status", "examples")
            )


def _add_ceilings(
    conn: Any,
    exp: Experiment,
    k: int,
    rel: int,
    repetition: int | None,
    judged_only: bool,
    out: dict[str, dict],
) -> None:
    """Per stage, recall@K and nDCG@K of its candidates ordered by the judgements
    (pgeval.stage_ceilings): ``ceiling``, ``actual`` (as ranked), ``headroom``. ``out``: label ->
    the stage's dict of :func:`stages`."""
    for r in dict_rows(
        conn,
        "SELECT label, measure, ceiling, actual, headroom FROM "
        "pgeval.stage_ceilings(%s, %s, %s, %s, %s)",
        (exp.experiment_id, k, rel, repetition, judged_only),
    ):
        if r["label"] in out:
            out[r["label"]].setdefault("ceiling", {})[r["measure"]] = _renamed(r, {}, HEADROOM_KEYS)


def stages(
    conn: Any,
    exp: Experiment,
    k: int,
    rel: int,
    repetition: int | None,
    runs: list[dict] | None = None,
    judged_only: bool = False,
) -> list[dict]:
    """One dict per stage: metrics (mean, min, max, stddev; judged@K), index recall, latency,
    rows; ``label``: the stage's name with its method where the kind's name would mislead
    ('bm25 (ts_rank_cd fallback)'), ``method``: how it ranked (from its runs' parameters)."""
    if runs is None:
        runs = dict_rows(
            conn, "SELECT * FROM pgeval.experiment_stages(%s, %s)", (exp.experiment_id, repetition)
        )
    params: dict[str, dict] = {}
    for r in runs:
        params.setdefault(r["label"], r["params"] or {})
    measures = [*stage_measures(k), f"judged@{k}"]
    out = _stage_metrics(conn, exp, measures, rel, repetition, params, judged_only)
    _add_index_recall(conn, exp, k, repetition, out)
    _add_latency(conn, exp, repetition, out)
    _add_failures(conn, exp, repetition, out)
    return list(out.values())


def _check_options(k: int, rel: int, worst: int) -> None:
    if k < 1:
        raise InputError(f"cut-off K must be >= 1, got {k}", field=param("k"))
    if rel not in (1, 2, 3):
        raise InputError(f"relevance threshold must be 1, 2 or 3, got {rel}", field=param("rel"))
    if worst < 0:
        raise InputError(f"{param('worst')} must be >= 0, got {worst}", field=param("worst"))


def _partial(
    conn: Any,
    exp: Experiment,
    name: str,
    runs: list[dict],
    repetition: int | None,
    allow_partial: bool,
) -> list[str]:
    """The PARTIAL warning of an interrupted experiment (or one with a run deleted); without
    ``allow_partial`` an IncompleteRun instead."""
    unfinished = [r["name"] for r in runs if r["status"] != "complete"]
    missing = missing_runs(conn, exp, repetition)
    if not (unfinished or missing or exp.status != "complete"):
        return []
    parts = [
        f"{len(names)} {what} of experiment '{name}' are {state} ({', '.join(names[:5])})"
        for names, what, state in (
            (unfinished, "run(s)", "not complete"),
            (missing, "stage run(s)", "missing"),
        )
        if names
    ]
    text = "; ".join(parts) or (
        f"experiment '{name}' is {exp.status}: some of its stages have not run"
    )
    if not allow_partial:
        raise IncompleteRun(
            text + ": their numbers would be wrong (resume the experiment, "
            f"or {param('allow_partial', True)} to see them labelled)"
        )
    return ["PARTIAL: " + text]


def _uneven_repetitions(runs: list[dict]) -> list[str]:
    labels = {
        r["repetition"]: [x["label"] for x in runs if x["repetition"] == r["repetition"]]
        for r in runs
    }
    if len({tuple(v) for v in labels.values()}) > 1:
        return [
            "the repetitions do not hold the same stages: "
            + "; ".join(f"{rep}: {','.join(v)}" for rep, v in sorted(labels.items()))
        ]
    return []


def _judged_warnings(
    exp: Experiment, counts: dict, runs: list[dict], rel: int, strict: bool
) -> list[str]:
    """Too few valid queries (an error under ``strict``, none at all always), no exact stage."""
    warnings = []
    if counts["valid"] == 0:
        raise InputError(
            f"test set '{exp.testset}' has no valid query (none has a chunk of "
            f"grade >= {rel}): nothing to attribute",
            field=param("rel"),
        )
    if counts["valid"] < MIN_VALID_QUERIES:
        text = (
            f"only {counts['valid']} valid queries (< {MIN_VALID_QUERIES}): the figures are "
            "not statistically meaningful"
        )
        if strict:
            raise InputError(text + f" ({param('strict', True)})", field=param("strict", True))
        warnings.append(text)
    if not any(r["role"] == "exact" for r in runs):
        warnings.append(
            "no exact stage: index recall is not available and the loss before "
            "fusion is shown as 'retrieval' (index and reach together)"
        )
    return warnings


def _losses(
    conn: Any,
    exp: Experiment,
    k: int,
    rel: int,
    repetition: int | None,
    first_rep: int,
    worst: int,
) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """The loss attribution: chain, summary by category, by query type, worst queries."""
    chain = dict_rows(
        conn,
        "SELECT label AS stage, role, link, cut FROM pgeval.loss_chain(%s, %s, %s)",
        (exp.experiment_id, k, first_rep),
    )
    loss = _whole_counts(
        dict_rows(
            conn,
            "SELECT category, chunks, share, recall_points, points_min, points_max, relevant, "
            "valid_queries, repetitions FROM pgeval.loss_summary(%s, %s, %s, %s)",
            (exp.experiment_id, k, repetition, rel),
        )
    )
    for r in loss:
        r["meaning"] = CATEGORIES.get(r["category"], "")
    by_type = _whole_counts(
        dict_rows(
            conn,
            "SELECT query_type AS type, category, queries, chunks, "
            "share, recall_points FROM pgeval.loss_by_type(%s, %s, %s, %s)",
            (exp.experiment_id, k, repetition, rel),
        )
    )
    worst_rows = (
        dict_rows(
            conn,
            "SELECT * FROM pgeval.loss_worst_queries(%s, %s, %s, %s, %s)",
            (exp.experiment_id, k, first_rep, rel, worst),
        )
        if worst
        else []
    )
    return chain, loss, by_type, worst_rows


def _method_notes(runs: list[dict]) -> list[str]:
    notes, seen = [], set()
    for r in runs:
        note = stage_method.note(r["label"], r["stage"], r["params"])
        if note and r["label"] not in seen:
            seen.add(r["label"])
            notes.append(note)
    return notes


def _failure_warnings(stage_rows: list[dict]) -> list[str]:
    """One warning per live service stage with queries the service did not answer."""
    warnings = []
    for st in stage_rows:
        f = st.get("failures")
        if f and f["failed"]:
            why = ", ".join(
                f"{n} x {'HTTP ' + c if c.isdigit() else c}"
                for c, n in sorted(f["by_status"].items())
            )
            first = f["examples"][0] if f["examples"] else {}
            warnings.append(
                f"stage {st['stage']}: {f['failed']} of {f['queries']} queries got "
                f"no answer from the service ({why}); they count as empty lists. "
                f"First: query '{first.get('query_id')}': {first.get('message')}"
            )
    return warnings


def build(
    conn: Any,
    name: str,
    *,
    k: int = 10,
    rel: int = 1,
    repetition: int | None = None,
    worst: int = 10,
    allow_partial: bool = False,
    strict: bool = False,
    judged_only: bool = False,
) -> StageReport:
    """Everything `pgeval stage-report` shows for experiment ``name``; ``judged_only``: the
    stages' measures on their judged chunks only (trec_eval's -J)."""
    _check_options(k, rel, worst)
    exp = resolve_experiment(conn, name)
    if repetition is not None and repetition not in exp.repetitions:
        raise NotFound(
            f"experiment '{name}' has no repetition {repetition} (it has "
            f"{', '.join(map(str, exp.repetitions))})"
        )
    runs = dict_rows(
        conn, "SELECT * FROM pgeval.experiment_stages(%s, %s)", (exp.experiment_id, repetition)
    )
    warnings = _partial(conn, exp, name, runs, repetition, allow_partial)
    warnings += _uneven_repetitions(runs)
    first_rep = repetition or exp.repetitions[0]
    final = next(r for r in runs if r["is_final"] and r["repetition"] == first_rep)
    counts = dict_rows(conn, "SELECT * FROM pgeval.run_counts(%s, %s)", (final["run_id"], rel))[0]
    judged, source = conn.execute(
        "SELECT t.n_judgements > 0, t.query_source FROM pgeval.experiment e "
        "JOIN pgeval.testset t USING (testset_id) WHERE e.experiment_id = %s",
        (exp.experiment_id,),
    ).fetchone()
    if not judged:  # query vectors without judgements: index recall, latency and rows only
        stage_rows = stages(conn, exp, k, rel, repetition, runs)
        return StageReport(
            exp,
            k,
            rel,
            repetition,
            counts,
            stage_rows,
            first_rep,
            warnings=warnings,
            judged=False,
            queries=source,
        )
    warnings += _judged_warnings(exp, counts, runs, rel, strict)
    chain, loss, by_type, worst_rows = _losses(conn, exp, k, rel, repetition, first_rep, worst)
    warnings += _method_notes(runs)
    stage_rows = stages(conn, exp, k, rel, repetition, runs, judged_only)
    by_stage = {s["stage"]: s for s in stage_rows}
    _add_ceilings(conn, exp, k, rel, repetition, judged_only, by_stage)
    warnings += _failure_warnings(stage_rows)
    final_judged = by_stage.get(final["label"], {}).get("metrics", {}).get(f"judged@{k}", {})
    low = judged_warning(f"judged@{k}", final_judged.get("mean"), judged_only)
    warnings += [low] if low else []
    heads = headroom(conn, exp, k, rel, repetition, judged_only)
    return StageReport(
        exp,
        k,
        rel,
        repetition,
        counts,
        stage_rows,
        first_rep,
        chain,
        loss,
        by_type,
        worst_rows,
        warnings,
        True,
        source,
        heads,
        advice(heads, k, by_stage),
        judged_only,
    )


def headroom(
    conn: Any, exp: Experiment, k: int, rel: int, repetition: int | None, judged_only: bool
) -> list[dict]:
    """pgeval.stage_headroom, one dict per (kind, stage, against), the largest first:
    ``{"kind", "stage", "against", "largest", "recall@K": {ceiling, actual, headroom},
    "ndcg@K": {...}}``."""
    out: dict[tuple, dict] = {}
    for r in dict_rows(
        conn,
        "SELECT * FROM pgeval.stage_headroom(%s, %s, %s, %s, %s)",
        (exp.experiment_id, k, rel, repetition, judged_only),
    ):
        row = out.setdefault(
            (r["kind"], r["label"], r["against"]),
            {"kind": r["kind"], "stage": r["label"], "against": r["against"], "largest": False},
        )
        row[r["measure"]] = _renamed(r, {}, HEADROOM_KEYS)
        row["largest"] = row["largest"] or r["largest"]
    return list(out.values())


# what recovers each kind of headroom (docs/stage-report.md "Ceilings and headroom")
RECOVERY = {
    "reorder": "rerank them",
    "reach": "hand on more candidates (a larger merge depth or rerank top_n) or add another path",
    "index": "raise the index's search setting",
}


def advice(heads: list[dict], k: int, by_stage: dict[str, dict] | None = None) -> str | None:
    """The largest measured headroom in one sentence, and what would recover it: reorder (the
    final stage's candidates ordered perfectly) calls for a rerank, reach (the chain's pool beyond
    them) for depth or another path, index (an ANN stage against exact search or a higher
    setting) for the setting. None without judgements."""
    if not heads:
        return None
    top = next((h for h in heads if h["largest"]), None)
    if top is None:
        return (
            f"No measured headroom at K = {k}: no stage gains from a perfect ordering, a "
            "deeper hand-on or a higher setting."
        )
    nd, rc = top[f"ndcg@{k}"], top[f"recall@{k}"]
    reach = f"ndcg@{k} {nd['ceiling']:.3f} and recall@{k} {rc['ceiling']:.3f}"
    stage, role = top["stage"], ((by_stage or {}).get(top["stage"]) or {}).get("role")
    now = f"{nd['actual']:.3f}, {rc['actual']:.3f}"
    if top["kind"] == "reorder":
        what = f"its candidates ordered perfectly reach {reach} ({now} as ranked)"
        how = "a better reranker" if role == "rerank" else RECOVERY["reorder"]
    elif top["kind"] == "reach":
        what = (
            f"the chain's lists ({top['against']}) ordered perfectly reach {reach} ({now} for "
            "its candidates)"
        )
        how = RECOVERY["reach"]
    else:
        what = f"{top['against']} reaches {reach} ({now} for {stage})"
        how = f"{RECOVERY['index']} of {stage}"
    return (
        f"Largest headroom: {top['kind']} at {stage}, +{nd['headroom']:.3f} ndcg@{k}: "
        f"{what}: {how}."
    )


def chain_text(chain: list[dict], stage_rows: list[dict] | None = None) -> str:
    """'hnsw (top 100) + bm25 (top 100) -> merge (top 20) -> rerank (top 10)'; ``stage_rows``
    (of :func:`stages`) name each stage's method where needed."""
    labels = {s["stage"]: s.get("label") or s["stage"] for s in stage_rows or ()}

    def cut(c: dict) -> str:
        return "all" if c["cut"] >= 2**31 - 1 else f"top {c['cut']}"

    chain = [{**c, "stage": labels.get(c["stage"], c["stage"])} for c in chain]

    paths = " + ".join(f"{c['stage']} ({cut(c)})" for c in chain if c["link"] == "path")
    parts = [paths] if paths else []
    parts += [
        f"{c['stage']} ({cut(c)})"
        for link in ("merge", "rerank")
        for c in chain
        if c["link"] == link
    ]
    text = " -> ".join(parts)
    ex = [c for c in chain if c["link"] == "exact"]
    if ex:
        text += f"   [exact search {cut(ex[0])} tells index from reach]"
    return text


def report(
    database: Database, name: str, *, repetition: str | int | None = None, **options: Any
) -> StageReport:
    """:func:`build` (``options``: its keywords) with every stage's figures read in one snapshot
    of ``database``; ``repetition`` is a number, ``"all"`` or None (all, means with their
    spread)."""
    from ..core.db import snapshot

    rep = parse_repetition(repetition)
    with snapshot(database) as conn:
        return build(conn, name, repetition=rep, **options)
