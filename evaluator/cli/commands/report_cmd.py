"""`pgeval report RUN|EXPERIMENT|REPORT.json --format json|md|html --out FILE`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import ALLOW_PARTIAL, DEPTH, DOMAIN_DISCOUNT, FORMAT, LEVELS, MEASURES, MIN_SCORE, OUT
from ..output import info, warn
from .common import measures_from, pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.command()
@click.argument("name", metavar="RUN|EXPERIMENT|REPORT.json")
@FORMAT.but(
    type=click.Choice(["json", "md", "html"]),
    default="json",
    help="json for scripts and `pgeval gate`, md for a pull request, "
    "html for people (self-contained, plots embedded).",
)
@OUT.but(metavar="FILE", help="Write here (atomically) instead of standard output.")
@MEASURES
@DOMAIN_DISCOUNT
@DEPTH.but(type=int, help="Ranked ids kept per query. [default: the largest cut-off]")
@MIN_SCORE
@click.option("--no-plots", is_flag=True, help="HTML without plots (no matplotlib needed).")
@ALLOW_PARTIAL.but(help="Report an incomplete run, labelled.")
@LEVELS
@pass_api
def report(
    pg: Pgeval,
    name: str,
    levels: bool,
    fmt: str,
    out: str | None,
    k: str | None,
    ndcg_k: str | None,
    mrr_k: str | None,
    extra_measures: str | None,
    no_plots: bool,
    **options: Any,
) -> None:
    """A report of a run (or of an experiment's final stage, with its stages) people and CI read.

    \b
    JSON: generated_at, config_hash, k values, case counts, summary (retrieval metrics,
    citation precision and answer accuracy when answers were imported, p50/p95/p99 latency),
    acceptance levels (with --levels), per-type and flagged queries with plans, and per query the ranked chunk
    ids, grades, latency and metric values. A saved JSON report can be re-rendered and is what
    `pgeval gate --baseline report.json` reads.
    HTML: one file, no network: acceptance levels coloured (--levels), stage waterfall of recall lost (for
    an experiment), recall-vs-latency curve (for a sweep), per-type bars, flagged queries with
    their plans, sortable per-query table.

    \b
    Examples:
      pgeval report hnsw-ef40 --format json --out baseline.json
      pgeval report my-experiment --format html --out report.html
      pgeval report baseline.json --format md > report.md
    """
    rendered = pg.report(
        name,
        format=fmt,
        out=out,
        measures=measures_from(k, ndcg_k, mrr_k, extra_measures),
        plots=not no_plots,
        levels=levels,
        **options,  # the others under their names
    )
    doc = rendered.doc
    for w in doc.get("warnings") or []:
        warn(w)
    if out:
        info(f"wrote {fmt} report of '{doc['run']['name'] if doc.get('run') else name}' to {out}")
    else:
        click.echo(rendered.text, nl=False)
