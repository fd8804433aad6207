"""Every flag that more than one command takes, and the option groups, each declared once
(:mod:`evaluator.cli.option_groups`). A command takes a flag as it is declared here, or with a help,
type or default of its own (``FLAG.but(help=...)``); a group as it is, or with one flag changed
(``GROUP.but("--k", default=...)``), a flag left out (``without``) or one of its own (``plus``).
Defaults and listings the library defines are read when a command is built (:class:`Later`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from .option_groups import F, Later, Opt, group, opt
from .output import FORMATS, format_help, set_wide


def vocabulary(name: str, field: str | None = None) -> Later:
    """``evaluator.api.vocabulary.NAME`` (``.FIELD``), read when a command is built."""

    def read() -> Any:
        from ..api import vocabulary as words

        value = getattr(words, name)
        return value if field is None else getattr(value, field)

    return Later(read)


def _ann_kinds() -> click.Choice:
    from ..api.vocabulary import ann_kinds

    return click.Choice(list(ann_kinds()))


def _build_help() -> str:
    from ..api.vocabulary import BUILD_OPTIONS

    listing = "; ".join(f"{method}: {', '.join(names)}" for method, names in BUILD_OPTIONS.items())
    return (
        f"Index build option and its values ({listing}). "
        "Built on a scratch copy of the target's vectors."
    )


# ---- the query source: a test set, or query vectors without judgements ------------------------
TESTSET = opt(
    "--testset",
    default=None,
    metavar="NAME",
    help="Test set (queries, judgements). Or one of the query-vector sources below.",
)
SAMPLE_QUERIES = opt(
    "--sample-queries",
    "sample_queries",
    type=int,
    default=None,
    metavar="N",
    help="Use N rows of the target (after its filters) as queries, drawn "
    "reproducibly (--seed); each query's own chunk is removed from its lists. "
    "No judgements: recall against exact search, latency, rows. With --group-by: N in all, "
    "spread over the groups (--group-queries: per group).",
)
SEED = opt(
    "--seed", type=int, default=None, metavar="S", help="Seed of --sample-queries. [default: 0]"
)
QUERIES_SQL = opt(
    "--queries-sql",
    "queries_sql",
    default=None,
    metavar="'SELECT id, vector ...'",
    help="A statement returning (query_id, vector), e.g. from the application's "
    "query log (run READ ONLY on the knowledge base).",
)
QUERIES_FILE = opt(
    "--queries-file",
    "queries_file",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Query vectors: a .npy matrix (ids q1, q2, ...) or JSONL lines with id and embedding.",
)
CAPTURED = opt(
    "--captured",
    default=None,
    metavar="SET",
    help="The queries the application sent, captured from the server log (`pgeval queries "
    "capture`); with --group-by, each group's own (those sent with its value).",
)
WINDOW = opt(
    "--window",
    default=None,
    metavar="30min|1h|7d",
    help="With --captured: only the queries sent within this time of its newest.",
)
# a new query source is one more option here: every command taking the group gets it in `queries`
QUERY_SOURCE = group(
    "Queries",
    TESTSET,
    SAMPLE_QUERIES,
    SEED,
    QUERIES_SQL,
    QUERIES_FILE,
    CAPTURED,
    WINDOW,
    into="queries",
)

# ---- what is measured --------------------------------------------------------------------------
TARGET = opt("--target", "target_name", required=True, metavar="NAME", help="Target to search.")


def _stage_help() -> str:
    from ..api.vocabulary import ann_kinds, kinds_listing

    return f"ANN stage to sweep ({kinds_listing(ann_kinds())}), measured against exact search."


STAGE = opt(
    "--stage",
    required=True,
    type=Later(_ann_kinds),
    metavar="KIND",
    help=Later(_stage_help),
)
REPETITION = opt(
    "--repetition",
    default="all",
    show_default=True,
    metavar="N|all",
    help="One repetition, or all of them (means with their spread).",
)
SET = opt(
    "--set",
    "settings",
    multiple=True,
    metavar="[STAGE:]GUC=VALUE",
    help="Setting applied at every point (SET LOCAL), e.g. enable_seqscan=off; "
    "STAGE:GUC=VALUE applies to that stage alone (the swept stage or exact).",
)
INDEX = opt(
    "--index",
    default=None,
    metavar="NAME",
    help="The ANN index to measure when the column has several (the derived sweep name "
    "depends on it; each point names the index it measured).",
)
EMBEDDER = opt(
    "--embedder",
    default=None,
    metavar="SPEC",
    help="Query embeddings (as in `run pipeline`). [default: precomputed]",
)
BASE_URL = opt(
    "--base-url",
    default=None,
    metavar="URL",
    help="openai: endpoint base, e.g. https://dashscope.aliyuncs.com/compatible-"
    "mode/v1 [default: $OPENAI_BASE_URL, else api.openai.com/v1].",
)
DIMENSIONS = opt(
    "--dimensions",
    type=click.IntRange(1, 16000),
    default=None,
    help="openai: requested embedding dimension (part of the embedder label).",
)
API_KEY_ENV = opt(
    "--api-key-env",
    default=None,
    metavar="VAR",
    help="openai: environment variable holding the API key "
    "[default: OPENAI_API_KEY; '' sends none]. The key is never printed.",
)

# ---- measuring ---------------------------------------------------------------------------------
K = opt(
    "--k",
    type=click.IntRange(1, 10000),
    default=vocabulary("SWEEP_DEFAULTS", "k"),
    show_default=True,
    help="Cut-off of recall against exact search.",
)
DEPTH = opt(
    "--depth",
    type=click.IntRange(1, 100000),
    default=None,
    help="Rows per query (LIMIT). [default: max(K, 20); K where the planner's own plan is measured]",
)
REPEAT = opt(
    "--repeat",
    type=click.IntRange(1, 100),
    default=vocabulary("SWEEP_DEFAULTS", "repeat"),
    show_default=True,
    help="Repetitions of every point (means and spread are reported).",
)
CONCURRENCY = opt(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=vocabulary("SWEEP_DEFAULTS", "concurrency"),
    show_default=True,
    help="Client connections for the throughput measurement.",
)
ISOLATE_INDEX = opt(
    "--isolate-index",
    is_flag=True,
    help="Drop the column's other vector indexes inside each ANN stage's transaction and roll "
    "back (takes an ACCESS EXCLUSIVE lock on the table for the stage; needs the table's "
    "owner; not READ ONLY).",
)
NO_CHECKSUM = opt(
    "--no-checksum",
    is_flag=True,
    help="Skip the content checksum of the knowledge-base table in the fingerprint (one scan "
    "of the table); keep the row count. For very large tables.",
)
STATEMENT_TIMEOUT = opt(
    "--statement-timeout",
    default=vocabulary("PIPELINE_DEFAULTS", "statement_timeout"),
    show_default=True,
    metavar="DURATION",
    help="Cancel any statement on the knowledge base that runs longer (e.g. 30s, 5min; "
    "0 = no limit). Applied with SET LOCAL and recorded in every run's settings.",
)
MEASURING = group(
    "Measuring", K, REPEAT, CONCURRENCY, ISOLATE_INDEX, NO_CHECKSUM, STATEMENT_TIMEOUT
)

# ---- building indexes on a scratch copy --------------------------------------------------------
BUILD = opt(
    "--build",
    "build",
    multiple=True,
    metavar="OPTION=V1,V2,...",
    help=Later(_build_help),
)
MAINTENANCE_WORK_MEM = opt(
    "--maintenance-work-mem",
    default=None,
    metavar="SIZE",
    help="maintenance_work_mem for index builds (never below the server's). "
    "[default: sized to the index from its rows, dimension and m]",
)
BUILD_TIMEOUT = opt(
    "--build-timeout",
    type=click.FloatRange(1, 7 * 86400),
    default=vocabulary("SWEEP_DEFAULTS", "build_timeout_s"),
    show_default=True,
    help="Seconds before an index build is cancelled.",
)
BUILDING = group("Building", BUILD, MAINTENANCE_WORK_MEM, BUILD_TIMEOUT)

PARAM = opt(
    "--param",
    "params",
    multiple=True,
    metavar="GUC=V1,V2,...",
    help="Query-time setting and its values; several give the cartesian product.",
)

# ---- finding the cheapest setting reaching a recall --------------------------------------------
TARGET_RECALL = opt(
    "--target-recall",
    type=float,
    default=vocabulary("SWEEP_DEFAULTS", "target_recall"),
    show_default=True,
    help="Recall@K (fraction of exact search) the recommendation must reach.",
)
FIND_MAX = opt(
    "--find-max",
    type=click.IntRange(1, 1_000_000),
    default=None,
    help="Largest value --find tries.  [default: 1000]",
)
FIND = group("Find", TARGET_RECALL, FIND_MAX)

# ---- budgets and bounds ------------------------------------------------------------------------
MAX_P95_MS = opt("--max-p95-ms", type=float, default=None, help="Budget: p95 latency (ms).")
BUDGETS = group(
    "Budgets",
    MAX_P95_MS,
    opt("--max-index-mb", type=float, default=None, help="Budget: index size (MB)."),
    opt("--max-build-s", type=float, default=None, help="Budget: build time (s)."),
)

# ---- groups (tenants) --------------------------------------------------------------------------
GROUP_BY = opt("--group-by", default=None, metavar="COLUMN")
GROUPING = group(
    "Groups",
    GROUP_BY,
    opt(
        "--max-groups",
        type=click.IntRange(1, 10000),
        default=vocabulary("DEFAULT_MAX_GROUPS"),
        show_default=True,
        help="With --group-by: at most this many groups, the largest half and the smallest half.",
    ),
    opt(
        "--group-queries",
        type=int,
        default=None,
        metavar="M",
        help="With --group-by: M sampled queries in each group (at most its chunks). [default: "
        "--sample-queries N spread over the groups measured, at least 30 each (N if smaller): "
        "300 over 10 groups is 30 per group]",
    ),
)

# ---- output ------------------------------------------------------------------------------------
FORMAT = opt("--format", "fmt", default="table", show_default=True)
WIDE = opt(
    "--wide",
    is_flag=True,
    expose_value=False,
    callback=set_wide,
    is_eager=True,
    help="Tables: every column, full values and hashes (wider than 80 columns).",
)


def formats(choices: Sequence[str], default: str = "table") -> tuple[Opt, ...]:
    """``--format`` with exactly ``choices`` in its help, and ``--wide`` when tables are one."""
    fmt = FORMAT.but(type=click.Choice(list(choices)), default=default, help=format_help(choices))
    return (fmt, WIDE) if "table" in choices else (fmt,)


def format_option(default: str = "table", choices: Sequence[str] = FORMATS) -> Callable[[F], F]:
    """:func:`formats` as one decorator, for a command that shows no headings."""
    return group("Output", *formats(choices, default))


PLOT = opt(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG of recall@K against p95 latency with the Pareto front.",
)
NAME = opt(
    "--name",
    default=None,
    help="Sweep name [default: derived from the sweep's "
    "configuration, so that the same command resumes it].",
)
OUT = opt(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write to this file instead of standard output.",
)
REPLACE = opt("--replace", is_flag=True, help="Replace an existing run of the same name.")

# ---- reading runs: measures, relevance, partial runs -------------------------------------------
REL = opt(
    "--rel",
    type=int,
    default=1,
    show_default=True,
    help="Lowest grade (0-3) that counts as relevant.",
)
MEASURES = group(
    "Measures",
    K.but(
        type=None,
        default=None,
        show_default=False,
        metavar="3,5,10",
        help="Recall/Precision/Hit cut-offs (definitions: docs/METRICS.md). [default: 3,5,10]",
    ),
    opt("--ndcg-k", metavar="5,10", help="nDCG cut-offs. [default: 5,10]"),
    opt("--mrr-k", metavar="20", help="MRR cut-offs. [default: 20]"),
    opt(
        "--measures",
        "extra_measures",
        metavar="NAMES",
        help="More ranked measures, after those of --k, --ndcg-k and --mrr-k: name@K, or rprec "
        "(R-precision, no cut-off) or map (average precision over the whole list; map@K cuts "
        "it at K); e.g. rprec,map,recall@100.",
    ),
    REL,
)
ALLOW_PARTIAL = opt("--allow-partial", is_flag=True, help="Accept an incomplete run (labelled).")
STRICT = opt("--strict", is_flag=True, help="Fail when fewer than 200 queries are valid.")
PER_QUERY = opt("--per-query", is_flag=True, help="One row per query of the test set.")
JUDGED_ONLY = opt(
    "--judged-only",
    is_flag=True,
    help="Measure each list on its judged chunks only: the chunks without a judgement are "
    "taken out before the measures are computed (trec_eval -J).",
)
DOMAIN_DISCOUNT = opt(
    "--domain-discount",
    type=float,
    default=0.0,
    show_default=True,
    help="Lower every acceptance threshold by this fraction (0 to 0.10).",
)
RUN = opt(
    "--run",
    "run",
    required=True,
    metavar="RUN",
    help="The run the answers were generated from (its test set names the queries).",
)
QUERIES = opt(
    "--queries",
    type=click.Path(dir_okay=False),
    help="TREC only: query texts as TSV, query-id<TAB>text.",
)


def _min_score_help() -> str:
    from ..api.vocabulary import kinds_listing, vector_kinds

    return (
        "Threshold for unanswerable queries ('returned nothing'). It follows the run's "
        "score direction: where scores are similarities (imports, bm25, merge, rerank) a "
        "result counts as returned when its score is at least SCORE; where they are "
        f"distances (vector stages: {kinds_listing(vector_kinds())}; lower is better) when its "
        "distance is at most SCORE. An unanswerable query with no such result is counted "
        "as having returned nothing. Without it: no result at all."
    )


MIN_SCORE = opt(
    "--min-score", type=float, default=None, metavar="SCORE", help=Later(_min_score_help)
)
LEVELS = opt(
    "--levels",
    is_flag=True,
    help="Show acceptance levels (excellent/good/pass/fail): docs/METRICS.md's for a "
    "knowledge base in a general domain, not levels of your test set.",
)
