"""`pgeval stage-report EXPERIMENT`: stages side by side, loss attribution, worst queries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import parse_measure, stage_measures
from ..flags import ALLOW_PARTIAL, JUDGED_ONLY, REL, REPETITION, STRICT, K, format_option
from ..output import echo_line, emit, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import StageReport


def _measures(report: StageReport) -> list[str]:
    k = report.k
    return list(
        dict.fromkeys([f"recall@{k}", *stage_measures(k), f"judged@{k}", f"index_recall@{k}"])
    )


def _cell(stage: dict, measure: str) -> dict | None:
    index = parse_measure(measure).kind == "index"
    return stage.get(measure) if index else stage["metrics"].get(measure)


def _range(cell: dict | None) -> float | None:
    """A measure's max - min over the repetitions; None without them."""
    return None if not cell or cell["min"] is None else cell["max"] - cell["min"]


def _headline(report: StageReport, names: list[str]) -> list[str]:
    """The measures a table shows without --wide: those at the report's K (recall@K,
    ndcg@K, index recall) and MRR; the first four measures when none is at K."""
    parsed = [parse_measure(name) for name in names]
    at_k = [m.name for m in parsed if m.cutoff == report.k or m.family.name == "mrr"]
    return at_k or names[:4]


def _stage_tables(
    report: StageReport, judged: bool = True
) -> list[tuple[list[dict], list[str], str, list[str]]]:
    """Quality (means), the spread over repetitions when there is one, and cost; each with the
    columns only --wide shows. Without judgements, quality is index recall alone."""
    measures = _measures(report) if judged else [f"index_recall@{report.k}"]
    narrow = [m for m in measures if m not in _headline(report, measures)]
    named = any(s["stage"] != s["kind"] for s in report.stages)
    key = ["stage", "kind"] if named else ["stage"]
    quality, spread, cost = [], [], []
    for s in report.stages:
        head = {"stage": s.get("label") or s["stage"], "kind": s["kind"]}
        quality.append({**head, **{m: (_cell(s, m) or {}).get("mean") for m in measures}})
        spread.append({**head, **{m: _range(_cell(s, m)) for m in measures}})
        rows, lat = s.get("rows") or {}, s.get("latency_ms") or {}
        cost.append(
            {
                **head,
                "rows_mean": rows.get("mean"),
                "rows_min": rows.get("min"),
                "short": rows.get("short_queries"),
                "depth": rows.get("depth"),
                **{f"{p}_ms": lat.get(p) for p in ("p50", "p95", "p99")},
                "dropped": (s.get("threshold") or {}).get("dropped"),
                "dropped_queries": (s.get("threshold") or {}).get("queries"),
                "failed": (s.get("failures") or {}).get("failed"),
            }
        )
    tables = [(quality, key + measures, "stages: quality (mean over valid queries)", narrow)]
    n_reps = max((s["repetitions"] for s in report.stages), default=1)
    if n_reps > 1 and any(
        v is not None and abs(v) > 1e-12 for r in spread for m, v in r.items() if m in measures
    ):
        tables.append(
            (spread, key + measures, f"spread over {n_reps} repetitions (max - min)", narrow)
        )
    dropped = any(s.get("threshold") for s in report.stages)
    live = any(s.get("failures") for s in report.stages)  # a live service stage is there
    extra = (["dropped", "dropped_queries"] if dropped else []) + (["failed"] if live else [])
    notes = (
        ["dropped: results past the target's threshold (first repetition)"] if dropped else []
    ) + (["failed: queries a live service did not answer"] if live else [])
    tables.append(
        (
            cost,
            key + ["rows_mean", "rows_min", "short", "depth", "p50_ms", "p95_ms", "p99_ms"] + extra,
            "; ".join(["stages: rows returned (short: fewer than depth) and latency"] + notes),
            ["kind", "dropped_queries"] + (["p99_ms", "rows_min"] if extra else []),
        )
    )
    return tables


def loss_rows(loss: list[dict], k: int) -> list[dict]:
    """The loss attribution's table: per category the chunks lost, their share, recall points."""
    kept = ("category", "chunks", "share")
    return [{**{c: r[c] for c in kept}, f"recall@{k} points": r["recall_points"]} for r in loss]


def _by_type_rows(report: StageReport) -> tuple[list[dict], list[str]]:
    cats = [r["category"] for r in report.loss]
    out: dict[str, dict] = {}
    for r in report.loss_by_type:
        row = out.setdefault(r["type"], {"type": r["type"], "queries": r["queries"]})
        row[r["category"]] = r["recall_points"]
    return list(out.values()), ["type", "queries", *cats]


def _worst_rows(report: StageReport) -> list[dict]:
    rows = []
    for w in report.worst:
        lost = [f"{x['chunk_id']}:{x['category']}" for x in w["lost"]]
        rows.append(
            {
                "query_id": w["query_id"],
                f"recall@{report.k}": w["recall"],
                "relevant": w["n_relevant"],
                "kept": w["kept"],
                "lost": ", ".join(lost[:8]) + (" ..." if len(lost) > 8 else ""),
                "query": (w["query_text"] or "")[:60],
            }
        )
    return rows


@click.command("stage-report")
@click.argument("experiment")
@K.but("k", type=int, default=10, help="Final cut-off of the loss attribution and of index recall.")
@REPETITION
@REL.but(help="Lowest grade (1-3) that counts as relevant.")
@click.option(
    "--worst",
    type=int,
    default=10,
    show_default=True,
    help="How many of the worst queries to list (0: none).",
)
@JUDGED_ONLY
@STRICT
@ALLOW_PARTIAL.but(help="Report an experiment whose runs are not all complete, labelled.")
@format_option(choices=("table", "json"))
@pass_api
def stage_report(
    pg: Pgeval,
    experiment: str,
    fmt: str,
    **options: Any,
) -> None:
    """The stages of EXPERIMENT side by side, and the stage that lost each relevant chunk.

    \b
    Per stage: Recall@3/5/10, MRR@20, nDCG@5/10 (judgements), judged@K (the share of the
    first K with a judgement; under 0.5 a warning: the figures are lower bounds), for ANN stages
    index recall@K against exact search (no judgements), rows returned and latency p50/p95/p99
    (nearest rank, at the timing boundary the run names).

    \b
    Ceilings: per stage, recall@K and nDCG@K of its candidates ordered by the judgements (the
    pool's oracle). Headroom (ceiling - actual) of three kinds, and what recovers it:
      reorder  the final stage's candidates ordered perfectly: rerank them
      reach    the chain's lists beyond the final stage's candidates: depth, another path
      index    an ANN stage against exact search, or a higher setting the experiment ran:
               the setting
    The advice names the largest headroom on nDCG@K, not the largest loss.

    \b
    Loss attribution at the final cut-off K: every relevant chunk of a valid query that is not
    in the final stage's top K is charged to the first link of the chain that lost it:
      index      exact search had it in its top D, the ANN index did not, no other path did
      reach      not even exact (or keyword) search found it: chunking, embedding, wording
      retrieval  index and reach together (the experiment has no exact stage)
      fusion     a retrieval path had it in its top D, the merge cut it (top M)
      rerank     it was handed to rerank (top M) and did not reach its top K
    Counts add up to the lost chunks; the Recall@K points of the categories plus the final
    Recall@K sum to 1. The same by query type, then the worst queries.

    \b
    Examples:
      pgeval stage-report exp1
      pgeval stage-report exp1 --k 5 --repetition 2
      pgeval stage-report exp1 --judged-only
      pgeval stage-report exp1 --format json > exp1-stages.json
    """
    from ...api.vocabulary import chain_text

    report = pg.stage_report(experiment, **options)  # the options under their names
    judged = report.judged
    warn(*report.warnings)
    if printed_json(fmt, report.as_dict()):
        return
    _print_header(report)
    for rows, columns, title, wide_only in _stage_tables(report, judged):
        emit(
            rows,
            "table",
            columns,
            wide_only=wide_only,
            title=title.replace(" over valid queries", "") if not judged else title,
        )
    _recall_tails(report)
    if not judged:
        return
    echo_line(f"chain at K = {report.k}: {chain_text(report.chain, report.stages)}")
    emit(
        loss_rows(report.loss, report.k),
        "table",
        ["category", "chunks", "share", f"recall@{report.k} points"],
        title=f"loss attribution (relevant chunks: "
        f"{report.loss[0]['relevant'] if report.loss else 0})",
    )
    for r in report.loss:
        echo_line(f"  {r['category']:<9} {r['meaning']}", indent=10)
    _ceilings(report)
    _types_and_worst(report)


def _ceilings(report: StageReport) -> None:
    """Each stage's ceiling (its candidates ordered by the judgements) beside its figure, the
    headroom of each kind, and the advice: the largest one and what recovers it."""
    k = report.k
    rows = [
        {
            "stage": s.get("label") or s["stage"],
            **{
                f"{m}@{k}{part}": (s["ceiling"].get(f"{m}@{k}") or {}).get(key)
                for m in ("ndcg", "recall")
                for part, key in (("", "actual"), (" ceiling", "ceiling"))
            },
        }
        for s in report.stages
        if s.get("ceiling")
    ]
    if rows:
        emit(
            rows,
            "table",
            list(rows[0]),
            title="ceilings: each stage's candidates ordered by the judgements",
        )
    heads = [
        {
            "headroom": h["kind"],
            "stage": h["stage"],
            "against": h["against"] or "",
            f"ndcg@{k}": h[f"ndcg@{k}"]["headroom"],
            f"recall@{k}": h[f"recall@{k}"]["headroom"],
            "largest": "←" if h["largest"] else "",
        }
        for h in report.headroom
    ]
    if heads:
        emit(heads, "table", list(heads[0]), title="headroom (ceiling - actual)")
    if report.advice:
        echo_line(report.advice)


def _recall_tails(report: StageReport) -> None:
    """Per ANN stage, index recall's tail: p5, p10, min and the queries at 0 (their neighbours
    missed are in the JSON output)."""
    from ...api.vocabulary import recall_text as text

    lines = [
        (s.get("label") or s["stage"], line)
        for s in report.stages
        if (line := text((_cell(s, f"index_recall@{report.k}") or {}).get("distribution")))
    ]
    if lines:
        click.echo(f"index recall@{report.k} per query (neighbours missed: --format json):")
        for name, line in lines:
            echo_line(f"  {name}: {line}")


def _print_header(report: StageReport) -> None:
    """The experiment, its queries and the timing boundary of each stage."""
    e, c = report.experiment, report.counts
    reps = (
        f"all {len(e.repetitions)} (means)" if report.repetition is None else str(report.repetition)
    )
    echo_line(
        f"experiment {e.name} · test set {e.testset} · status {e.status} · repetitions {reps}"
    )
    if report.judged:
        echo_line(
            f"queries {c['queries']}: valid {c['valid']}, excluded (no relevant) "
            f"{c['excluded']}, unanswerable {c['unanswerable']}"
        )
    else:
        from .query_options import no_judgements_line

        echo_line(no_judgements_line(report.queries, report.k))
    boundaries: dict[str, list[str]] = {}
    for s in report.stages:
        if s.get("timing_boundary"):
            boundaries.setdefault(s["timing_boundary"], []).append(s["stage"])
    if boundaries:
        click.echo("timing boundary:")
        for text, names in boundaries.items():
            echo_line(f"  {', '.join(names)}: {text}")


UNTYPED = (
    "by query type: no query of the test set has a type, so the loss above is its only group "
    '(a "type" per query breaks it down: docs/testsets.md)'
)


def _types_and_worst(report: StageReport) -> None:
    """The loss per query type and the worst queries, as tables."""
    by_type, cols = _by_type_rows(report)
    untyped = len(by_type) == 1 and by_type[0]["type"] in (None, "", "(untyped)")
    if untyped:  # one group: the loss attribution again
        echo_line(UNTYPED)
    elif by_type:
        emit(by_type, "table", cols, title=f"Recall@{report.k} points by query type")
    if report.worst:
        emit(
            _worst_rows(report),
            "table",
            ["query_id", f"recall@{report.k}", "relevant", "kept", "lost", "query"],
            title=f"worst queries (repetition {report.worst_repetition})",
        )
