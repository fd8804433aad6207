"""`pgeval compare BASELINE CANDIDATE [RUN]...`: deltas with significance, wins/losses, reading
hints; more than two runs: every pair, Holm-corrected."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import ALLOW_PARTIAL, MEASURES, SEED, format_option
from ..output import emit, to_json, warn
from .common import measures_from, pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import Comparison, MultiComparison


@click.command()
@click.argument("runs", metavar="BASELINE CANDIDATE [RUN]...", nargs=-1, required=True)
@MEASURES
@click.option(
    "--alpha",
    type=float,
    default=0.05,
    show_default=True,
    help="Significance level: a delta with p < alpha counts as a real change.",
)
@click.option(
    "--permutations",
    type=int,
    default=10_000,
    show_default=True,
    help="Random sign flips of the randomisation test (and bootstrap resamples).",
)
@SEED.but(
    default=0,
    show_default=True,
    help="Random seed: the same runs always give the same p-values.",
    metavar=None,
)
@click.option(
    "--test",
    "test",
    type=click.Choice(["randomisation", "t-test"]),
    default="randomisation",
    show_default=True,
    help="The paired two-sided test behind each p-value: the randomisation test (sign flips, "
    "ranx's default) or Student's paired t-test (scipy.stats.ttest_rel's p-value; --permutations "
    "then sets the bootstrap resamples only).",
)
@click.option(
    "--top",
    type=int,
    default=10,
    show_default=True,
    help="How many of the queries that moved most to list.",
)
@click.option(
    "--by",
    "moved_by",
    metavar="METRIC",
    help="Metric that ranks the queries that moved. [default: ndcg@10]",
)
@ALLOW_PARTIAL
@format_option(choices=("table", "json"))
@pass_api
def compare(
    pg: Pgeval,
    runs: tuple[str, ...],
    k: str | None,
    ndcg_k: str | None,
    mrr_k: str | None,
    extra_measures: str | None,
    top: int,
    moved_by: str | None,
    fmt: str,
    **common: Any,
) -> None:
    """Compare CANDIDATE with BASELINE (runs, experiments or saved JSON reports) query by query.

    \b
    For every metric: both means, the delta, a bootstrap 95 % confidence interval of the delta,
    and the p-value of a paired two-sided randomisation test over the per-query values (10,000
    sign flips, seeded; --test t-test for a paired t-test); per-query wins / ties / losses; the queries that moved most; what the
    pattern suggests (METRICS.md: "recall = and MRR ↓ → fusion or rerank" ...); and what differs
    between the two configurations, with a warning when more than one variable changed.
    Runs over different test sets are refused.

    \b
    More than two runs: every pair (the earlier run is the pair's baseline), with Holm's
    correction across all pairs and measures (a delta is significant when its adjusted p,
    "p Holm", is below --alpha), W/T/L per pair and measure, and a note when a run of a pair
    was picked in-sample (its params say "tuned": true, as `pgeval tune` stores its pick).

    \b
    Examples:
      pgeval compare hnsw-ef40 hnsw-ef80
      pgeval compare baseline.json candidate-run --by recall@10 --top 20
      pgeval compare prod new --format json > comparison.json
      pgeval compare k10 k30 k60 k100 --measures ndcg@10
    """
    if len(runs) < 2:
        raise click.UsageError("give at least two runs: BASELINE CANDIDATE [RUN]...")
    # the options both API methods take go to them under their names
    common["measures"] = measures_from(k, ndcg_k, mrr_k, extra_measures)
    from ...api.results import MultiComparison

    if len(runs) > 2:
        c: Comparison | MultiComparison = pg.compare_all(list(runs), **common)
    else:
        c = pg.compare(runs[0], runs[1], top=top, moved_by=moved_by, **common)
    if fmt == "json":
        click.echo(to_json(c.as_dict()))
    elif isinstance(c, MultiComparison):
        _many(c)
    else:
        _two(c)
    warn(*c.warnings)


# the columns of a pair's measures (:func:`_measure_row`) and of its latency
MEASURE_COLUMNS = ["metric", "baseline", "candidate", "delta", "95% CI", "p", "sig", "W/T/L"]
LATENCY_COLUMNS = ["metric", "baseline", "candidate", "delta", "ratio"]


def _two(c: Comparison) -> None:
    """Two runs: the table of measures, latency, the queries that moved, the reading."""
    click.echo(
        f"baseline {c.baseline} · candidate {c.candidate} · test set {c.testset} · "
        f"{_test_line(c.test, c.permutations, c.seed)}, alpha {c.alpha:g}"
    )
    emit(
        [_measure_row(r) for r in c.rows],
        "table",
        MEASURE_COLUMNS,
    )
    if c.latency:
        emit(
            [_latency_row(r) for r in c.latency],
            "table",
            LATENCY_COLUMNS,
            title="latency (ms)",
        )
    if c.moved:
        emit(
            [{**r, "delta": _signed(r["delta"])} for r in c.moved],
            "table",
            ["query_id", "baseline", "candidate", "delta", "text"],
            title=f"queries that moved most ({c.moved_by})",
        )
    _reading(c)


def _test_line(test: str, permutations: int, seed: int) -> str:
    return (
        "paired t-test"
        if test == "t-test"
        else f"randomisation test {permutations} permutations, seed {seed}"
    )


def _many(c: MultiComparison) -> None:
    """Every pair: one table of measures (p and Holm's p), latency, hints, differences."""
    click.echo(
        f"runs {', '.join(c.runs)} · test set {c.testset} · "
        f"{_test_line(c.test, c.permutations, c.seed)}, alpha {c.alpha:g} · Holm's correction "
        f"over {c.tests} tests ({len(c.pairs)} pairs × measures)"
    )
    emit(
        [
            {**_measure_row(r), "pair": _pair(p), "p Holm": _p(r.get("p_holm"))}
            for p in c.pairs
            for r in p["rows"]
        ],
        "table",
        ["pair", *MEASURE_COLUMNS[:6], "p Holm", *MEASURE_COLUMNS[6:]],
    )
    latency = [{**_latency_row(r), "pair": _pair(p)} for p in c.pairs for r in p["latency"]]
    if latency:
        emit(
            latency,
            "table",
            ["pair", *LATENCY_COLUMNS],
            title="latency (ms)",
        )
    click.echo("reading (Holm-corrected):")
    for p in c.pairs:
        for h in p["hints"]:
            click.echo(f"  {_pair(p)}: {h}")
        if p["changes"]:
            keys = ", ".join(ch["key"] for ch in p["changes"])
            click.echo(f"  {_pair(p)} differ in: {keys}")


def _reading(c: Comparison) -> None:
    """How to read the comparison and what differs in the configuration."""
    click.echo("reading:")
    for h in c.hints:
        click.echo(f"  {h}")
    if c.changes:
        emit(
            c.changes, "table", ["key", "baseline", "candidate"], title="configuration differences"
        )


def _measure_row(r: dict[str, Any]) -> dict[str, Any]:
    """A measure's row of a pair, as the tables show it."""
    return {
        "metric": r["metric"],
        "baseline": r["baseline"],
        "candidate": r["candidate"],
        "delta": _signed(r["delta"]),
        "95% CI": _ci(r),
        "p": _p(r["p_value"]),
        "sig": "*" if r["significant"] else "",
        "W/T/L": _wtl(r),
    }


def _latency_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        **r,
        "delta": _signed(r["delta"], 1),
        "ratio": None if r["ratio"] is None else f"×{r['ratio']:.2f}",
    }


def _pair(p: dict[str, Any]) -> str:
    return f"{p['baseline']} → {p['candidate']}"


def _signed(v: float | None, digits: int = 4) -> str | None:
    return None if v is None else f"{v:+.{digits}f}"


def _ci(r: dict[str, Any]) -> str:
    return "" if r["ci_low"] is None else f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"


def _p(p: float | None) -> str:
    return "" if p is None else f"{p:.4f}"


def _wtl(r: dict[str, Any]) -> str:
    return "" if r["wins"] is None else f"{r['wins']}/{r['ties']}/{r['losses']}"
