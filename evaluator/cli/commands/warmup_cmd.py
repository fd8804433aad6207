"""`pgeval warmup --target NAME`: cache the table and its indexes before any timing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api.vocabulary import WARMUP_DEFAULTS
from ..flags import EMBEDDER, INDEX, SET, TARGET, TESTSET, K, format_option
from ..output import emit, info, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import PassStats


@click.command()
@TARGET.but(help="Target to warm up (see `pgeval target list`).")
@TESTSET.but(
    help="Warm up with this test set's query embeddings "
    "[default: seeded random vectors of the target's dimension].",
)
@EMBEDDER.but(metavar="LABEL", help="Which stored query embeddings to use.")
@SET.but(
    metavar="GUC=VALUE",
    help="Query-time setting for the passes (SET LOCAL), e.g. hnsw.ef_search=100.",
)
@K.but(default=WARMUP_DEFAULTS.k, help="Rows per query (LIMIT).")
@click.option(
    "--max-passes",
    type=click.IntRange(2, 100),
    default=WARMUP_DEFAULTS.max_passes,
    show_default=True,
    help="Stop after this many passes even when latency has not settled.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(0.001, 1.0),
    default=WARMUP_DEFAULTS.tolerance,
    show_default=True,
    help="Settled when two consecutive passes' median latencies differ by less.",
)
@click.option(
    "--random-queries",
    type=click.IntRange(1, 100000),
    default=WARMUP_DEFAULTS.random_queries,
    show_default=True,
    help="Number of random vectors when no --testset is given.",
)
@click.option("--no-prewarm", is_flag=True, help="Do not use pg_prewarm even when installed.")
@INDEX.but(
    help="Warm this ANN index only. [default: every ANN index of the target's vector column, "
    "each through the statement of the stage kind it serves]"
)
@format_option(choices=("table", "json"))
@pass_api
def warmup(pg: Pgeval, target_name: str, no_prewarm: bool, fmt: str, **options: Any) -> None:
    """Warm the target's table and ANN indexes up before measuring latency.

    \b
    Uses pg_prewarm when the extension is installed in the database (pgeval never installs it),
    then, for every ANN index of the target's vector column (or --index), runs warm-up passes of
    the queries through the statement of the stage kind that index serves (the ANN kinds of
    `pgeval sweep --stage`) until the median latency of two consecutive passes differs by
    less than --tolerance (5 %), and says which indexes were warmed. Prints
    buffer hits and reads of the table and each index before and after (pg_statio_user_*), and
    warns when an ANN index is larger than shared_buffers.

    \b
    Examples:
      pgeval warmup --target kb
      pgeval warmup --target kb --testset kb-v1 --set hnsw.ef_search=100
      pgeval warmup --target kb --index chunks_embedding_bq --format json
    """

    def on_pass(p: PassStats) -> None:
        if fmt == "table":
            info(
                ("" if p.index is None else f"{p.index} ")
                + f"pass {p.n}: median {p.median_ms:.3f} ms, p95 {p.p95_ms:.3f} ms, "
                f"blocks hit {p.blocks_hit}, read {p.blocks_read}"
            )

    # the other options go to the API under their names
    report = pg.warmup(target_name, prewarm=not no_prewarm, on_pass=on_pass, **options)
    if not printed_json(fmt, report.as_dict()):
        click.echo(
            f"target {report.target}: {report.method}; {report.queries} queries from "
            f"{report.source}"
        )
        click.echo(f"plan: {report.plan}")
        state = "settled" if report.converged else "NOT settled"
        click.echo(
            f"{len(report.passes)} passes, median latency {state} at "
            f"{report.passes[-1].median_ms:.3f} ms"
        )
        for i in report.indexes:
            if i["index"] is None:
                continue
            if "skipped" in i:
                click.echo(f"not warmed: index {i['index']} ({i['kind']}): {i['skipped']}")
                continue
            forced = ", ".join(f"{k}={v}" for k, v in (i.get("settings") or {}).items())
            click.echo(
                f"warmed: index {i['index']} ({i['kind']}) in {i['passes']} passes, median "
                f"{i['median_ms']:.3f} ms" + (f" (planner set {forced})" if forced else "")
            )
        if report.prewarmed:
            click.echo(
                "pg_prewarm: " + ", ".join(f"{r} {n} blocks" for r, n in report.prewarmed.items())
            )
        rows = [
            {
                "relation": r["relation"],
                "kind": r["kind"],
                "before hit/read": f"{r['hit_before']}/{r['read_before']}",
                "after hit/read": f"{r['hit_after']}/{r['read_after']}",
                "hit % during": (
                    None if r["hit_ratio_during"] is None else f"{100 * r['hit_ratio_during']:.1f}"
                ),
            }
            for r in report.relations()
        ]
        emit(rows, "table", title="buffer blocks: hits (shared buffers) / reads (OS)")
    warn(*report.warnings)
