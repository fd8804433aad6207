"""`pgeval metrics RUN`: the metric contract of METRICS.md, read from the SQL API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import LEVELS_NOTE
from ..flags import (
    ALLOW_PARTIAL,
    DOMAIN_DISCOUNT,
    JUDGED_ONLY,
    LEVELS,
    MEASURES,
    MIN_SCORE,
    PER_QUERY,
    STRICT,
    format_option,
)
from ..output import echo_line, emit, fmt_value, is_wide, printed_json, warn
from .common import measures_from, pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import Evaluation


@click.command()
@click.argument("run")
@MEASURES
@PER_QUERY.but(help="One row per valid query instead of the means.")
@click.option("--by-type", is_flag=True, help="Means per query type tag.")
@click.option(
    "--flagged",
    is_flag=True,
    help="List low-recall (< 0.3) and poor-ranking (nDCG@10 < 0.5) queries.",
)
@click.option(
    "--plans",
    is_flag=True,
    help="With the flagged queries, show the stored EXPLAIN "
    "(ANALYZE, BUFFERS) summary of the stage that served each (capture them with "
    "`pgeval plans RUN`).",
)
@DOMAIN_DISCOUNT.but(
    help="Lower every acceptance threshold by this fraction (0 to 0.10) for a specialised domain."
)
@MIN_SCORE
@JUDGED_ONLY
@STRICT
@ALLOW_PARTIAL.but(help="Show an incomplete run's figures, labelled.")
@LEVELS
@format_option()
@pass_api
def metrics(
    pg: Pgeval,
    run: str,
    k: str | None,
    ndcg_k: str | None,
    mrr_k: str | None,
    extra_measures: str | None,
    per_query: bool,
    by_type: bool,
    flagged: bool,
    plans: bool,
    levels: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Recall@K, MRR@K, nDCG@K, Precision@K and Hit@K of RUN, means over valid queries.

    \b
    Valid queries have at least one relevant chunk; the rest are counted (excluded, unanswerable)
    and never averaged in. A valid query missing from the run scores 0 ("no result").
    nDCG uses exponential gain, 2^grade - 1 (ranx's ndcg_burges), not trec_eval's default
    linear gain (ndcg_cut): the two agree on binary judgements, not on graded ones.
    judged@K (K: the largest recall cut-off) is the share of the first K that carries a
    judgement, grade 0 included; under 0.5 the figures are lower bounds (a warning says so),
    and --judged-only measures each list without its unjudged chunks (trec_eval -J).
    With --levels, the acceptance levels (excellent/good/pass/fail) of METRICS.md's contract,
    set for a knowledge base in a general domain (not for your test set); JSON always has them.

    \b
    Examples:
      pgeval metrics bm25-baseline
      pgeval metrics bm25-baseline --per-query --format jsonl
      pgeval metrics bm25-baseline --k 1,3,10 --ndcg-k 10 --format json
      pgeval metrics bm25-baseline --judged-only
    """

    flagged = flagged or plans
    measures = measures_from(k, ndcg_k, mrr_k, extra_measures)
    ev = pg.metrics(
        run,
        measures=measures,
        per_query=per_query,
        by_type=by_type,
        flagged=flagged,
        plans=plans,
        **options,  # the others under their names
    )
    measures = ev.measures  # with judged@K
    plan_rows = ev.plans
    warn(*ev.warnings)
    if not per_query and printed_json(fmt, ev.as_dict()):
        return
    if per_query:
        assert ev.per_query is not None  # with_per_query=True computes it
        emit(ev.per_query, fmt, ["query_id", *measures], title=f"{run}: per query")
        return
    _summary(ev, measures, fmt, levels)
    if by_type:
        assert ev.by_type is not None  # with_by_type=True computes it
        untyped = [t for t in ev.by_type if t["type"] not in (None, "", "(untyped)")] == []
        if fmt == "table" and untyped and len(ev.by_type) <= 1:  # the table above, again
            echo_line(UNTYPED)
        elif fmt == "table":  # one column per type: types are few, measures many
            types = [t["type"] for t in ev.by_type]
            rows = [{"measure": "queries", **{t["type"]: t["queries"] for t in ev.by_type}}]
            rows += [
                {"measure": name, **{t["type"]: t.get(name) for t in ev.by_type}}
                for name in measures
            ]
            emit(rows, fmt, ["measure", *types], title="by query type")
        else:
            emit(ev.by_type, fmt, ["type", "queries", *measures], title="by query type")
    if plans:
        assert plan_rows is not None  # plans=True reads them
        rows = plan_rows
        if fmt == "table":
            rows = [{k: v for k, v in r.items() if k != "plan"} for r in rows]
        emit(rows, fmt, None, title="flagged queries and the plans that served them")
        return
    if flagged:
        assert ev.flagged is not None  # with_flagged=True computes it
        if fmt == "table" and not ev.flagged:
            click.echo("flagged queries: none (no Recall < 0.3, no nDCG@10 < 0.5)")
        else:
            emit(ev.flagged, fmt, ["query_id", "flag", "measure", "value"], title="flagged queries")


UNTYPED = (
    "by query type: no query of the test set has a type, so the figures above are its only "
    'group (a "type" per query breaks them down: docs/testsets.md)'
)


def _summary(ev: Evaluation, measures: list[str], fmt: str, levels: bool) -> None:
    """The run's header and counts (table), then one row per measure (with --levels, its
    acceptance level and whose levels they are)."""
    from ...api.vocabulary import stage_label

    stage = stage_label(ev.run.stage, ev.run.stage, ev.run.params)
    header = (
        f"run {ev.run.name} · test set {ev.run.testset} · stage {stage} · "
        f"config {fmt_value(ev.run.config_hash, wide=is_wide())}"
    )
    rows = [
        {"measure": name, "value": ev.summary[name]}
        | ({"level": ev.levels.get(name)} if levels else {})
        for name in measures
    ]
    if fmt == "table":
        c = ev.counts
        echo_line(header)
        echo_line(
            f"queries {c['queries']}: valid {c['valid']}, excluded (no relevant) "
            f"{c['excluded']}, unanswerable {c['unanswerable']} (returned nothing: "
            f"{c['unanswerable_silent']}), no result {c['no_result']}"
        )
        echo_line(f"order rule: {ev.run.order_rule}")
        if ev.judged_only:
            echo_line("judged only: each list without its unjudged chunks (trec_eval -J)")
    emit(rows, fmt, ["measure", "value", "level"] if levels else ["measure", "value"])
    if levels and fmt == "table":
        echo_line(LEVELS_NOTE)
