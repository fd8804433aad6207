"""Options naming the queries of `pgeval sweep`, `advise`, `watch` and `run pipeline`: a test
set, or query vectors without judgements (``--sample-queries``, ``--queries-sql``,
``--queries-file``, ``--captured``)."""

from __future__ import annotations

from typing import Any

import click

from ...api import vocabulary
from ..output import F

_OPTIONS = (
    click.option(
        "--testset",
        default=None,
        metavar="NAME",
        help="Test set (queries, judgements). Or one of the query-vector sources below.",
    ),
    click.option(
        "--sample-queries",
        "sample_queries",
        type=int,
        default=None,
        metavar="N",
        help="Use N rows of the target (after its filters) as queries, drawn "
        "reproducibly (--seed); each query's own chunk is removed from its lists. "
        "No judgements: recall against exact search, latency, rows.",
    ),
    click.option(
        "--seed", type=int, default=None, metavar="S", help="Seed of --sample-queries. [default: 0]"
    ),
    click.option(
        "--queries-sql",
        "queries_sql",
        default=None,
        metavar="'SELECT id, vector ...'",
        help="A statement returning (query_id, vector), e.g. from the application's "
        "query log (run READ ONLY on the knowledge base).",
    ),
    click.option(
        "--queries-file",
        "queries_file",
        default=None,
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="Query vectors: a .npy matrix (ids q1, q2, ...) or JSONL lines with id and embedding.",
    ),
    click.option(
        "--captured",
        default=None,
        metavar="SET",
        help="The queries the application sent, captured from the server log "
        "(`pgeval queries capture`); with --group-by, each group's own.",
    ),
    click.option(
        "--window",
        default=None,
        metavar="30min|1h|7d",
        help="With --captured: only the queries sent within this time of its newest.",
    ),
)


def query_source_options(f: F) -> F:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def no_judgements_line(info: dict | None, k: int) -> str:
    what = "queries without judgements"
    if info:
        src = info.get("source")
        what = {
            "sample": f"{info.get('count')} rows sampled from the target (seed "
            f"{info.get('seed')}, own chunk removed)",
            "sql": f"{info.get('count')} query vectors from --queries-sql",
            "file": f"{info.get('count')} query vectors from {info.get('file')}",
            "captured": f"{info.get('count')} queries the application sent (captured set "
            f"{info.get('captured')})",
        }.get(str(src), what)
    line = (
        f"queries: {what}; no graded judgements, so the measures are recall@{k} against "
        "exact search, latency and rows returned"
    )
    if info and info.get("source") == "sample":
        line += f"\n{vocabulary.SAMPLED_BIAS}"
    return line


def __getattr__(name: str) -> Any:
    """``SAMPLED_BIAS``, the note of sampled queries, read where it is defined when first asked
    for (the module is imported by every command's --help: the note's module is not)."""
    if name == "SAMPLED_BIAS":
        return vocabulary.SAMPLED_BIAS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
