"""`pgeval testset load|list|show|delete`: test sets of queries and graded judgements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import FORMAT, NAME, QUERIES, REPLACE, format_option
from ..output import echo_line, emit, printed_json
from .common import pass_api
from .testset_pool_cmd import grade, holes

if TYPE_CHECKING:
    from ...api import Pgeval

_FORMATS = ["jsonl", "csv", "trec", "beir"]


@click.group()
def testset() -> None:
    """Test sets: queries with graded judgements (chunk id -> grade 0-3).

    \b
    Examples:
      pgeval testset load cases.jsonl --name kb-v1
      pgeval testset load cran.qrels --queries cran.tsv --grade-map 1=3,2=2,3=1,4=0,-1=0 --name cran
      pgeval testset load ./scifact --format beir --name scifact
      pgeval testset list
      pgeval testset show kb-v1 --format json
      pgeval testset holes cran-demo --depth 10 --out pool.csv
      pgeval testset grade pool.csv
    """


testset.add_command(holes)
testset.add_command(grade)

_LIST_COLUMNS = [
    "name",
    "queries",
    "judgements",
    "valid",
    "excluded",
    "unanswerable",
    "runs",
    "format",
]


@testset.command()
@click.argument("file", type=click.Path(dir_okay=True, allow_dash=False))
@NAME.but(required=True, help="Name of the test set (runs refer to it).")
@FORMAT.but(
    "source_format",
    type=click.Choice(_FORMATS),
    default=None,
    help="Input format. [default: from the name: .jsonl, .csv, .qrels/.trec, a folder is BEIR]",
    show_default=False,
)
@QUERIES
@click.option(
    "--grade-map",
    metavar="CODE=GRADE,...",
    help="Map source grades onto 0-3 and record the map, e.g. 1=3,2=2,3=1,4=0,-1=0 "
    "(Cranfield). A source grade missing from the map is an error.",
)
@REPLACE.but(help="Replace a test set of this name with different content (its runs are deleted).")
@click.option(
    "--output",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="How to print the summary: table for people, json for scripts.",
)
@pass_api
def load(
    pg: Pgeval,
    file: str,
    name: str,
    source_format: str | None,
    fmt: str,
    **options: Any,
) -> None:
    """Load FILE as test set NAME: validated, all or nothing, in one transaction.

    \b
    Formats (docs/testsets.md):
      jsonl  {"id": "q1", "query": "...", "relevant": {"c12": 3, "c40": 1}, "type": ["fuzzy"],
              "answerable": true, "expected_facts": ["7 days"], "embedding": [...]}
             ("relevant" may be a list of chunk ids, grade 1 each)
      csv    a header row with the same fields; list cells as JSON or c12:3;c40:1
      trec   qrels lines "qid 0 chunk grade"; --queries TSV "qid<TAB>text" optional
      beir   a folder with queries.jsonl and qrels/test.tsv

    \b
    Any bad line stops the load with file, line and field named and nothing written.
    Loading the same content under the same name again is a no-op ("unchanged");
    different content needs --replace.

    \b
    Examples:
      pgeval testset load cases.jsonl --name kb-v1
      pgeval testset load cases.csv --name kb-v1 --replace
      pgeval testset load cran.qrels --queries cran.tsv --grade-map 1=3,2=2,3=1,4=0,-1=0 --name cran
    """
    # the other options go to the API under their names
    report = pg.load_testset(file, name, format=source_format, progress=True, **options)
    if printed_json(fmt, report.as_dict()):
        return
    r = report
    if r.unchanged:
        echo_line(f"test set '{r.name}' unchanged (same content hash); nothing rewritten")
    elif r.replaced:
        echo_line(
            f"replaced test set '{r.name}' (id {r.testset_id}) from {r.source_file} "
            f"({r.source_format}); deleted {r.runs_deleted} run(s) of the old one"
        )
    else:
        echo_line(
            f"loaded test set '{r.name}' (id {r.testset_id}) from {r.source_file} "
            f"({r.source_format}) in {r.seconds:.2f} s"
        )
    echo_line(
        f"queries {r.n_queries}: valid {r.n_valid}, excluded (no relevant) "
        f"{r.n_no_relevant}, unanswerable {r.n_unanswerable}"
    )
    echo_line(f"judgements {r.n_judgements}")
    if r.n_skipped:
        echo_line(f"skipped {r.n_skipped} queries that no judgement names")
    if r.grade_map:
        echo_line("grade map " + ",".join(f"{k}={v}" for k, v in r.grade_map.items()))
    echo_line(f"content hash sha256:{r.content_hash}")


@testset.command("list")
@format_option()
@pass_api
def list_(pg: Pgeval, fmt: str) -> None:
    """List the stored test sets with their counts and content hash.

    \b
    Examples:
      pgeval testset list
      pgeval testset list --format json
    """
    rows = pg.testsets()
    if fmt == "table":
        if not rows:
            click.echo("no test sets (load one with `pgeval testset load FILE --name NAME`)")
            return
        rows = [{**r, "hash": r["content_hash"][:12]} for r in rows]
        emit(rows, fmt, [*_LIST_COLUMNS, "hash"], wide_only=["excluded", "format"])
        return
    emit(rows, fmt, [*_LIST_COLUMNS, "content_hash", "created"])


@testset.command()
@click.argument("name")
@format_option(choices=("table", "json"))
@pass_api
def show(pg: Pgeval, name: str, fmt: str) -> None:
    """Describe test set NAME: counts, grade histogram, query types, grade map, hash.

    \b
    Examples:
      pgeval testset show kb-v1
      pgeval testset show kb-v1 --format json
    """
    info = pg.testset(name)
    if printed_json(fmt, info):
        return
    gm = info["grade_map"]
    lines = [
        ("test set", f"{info['name']} (id {info['testset_id']})"),
        ("source", f"{info['source_file']} ({info['format']})"),
        ("created", info["created"].strftime("%Y-%m-%d %H:%M:%S %Z")),
        (
            "queries",
            f"{info['queries']}: valid {info['valid']}, excluded (no relevant) "
            f"{info['excluded']}, unanswerable {info['unanswerable']}"
            + (f", without text {info['without_text']}" if info["without_text"] else ""),
        ),
        (
            "judgements",
            str(info["judgements"])
            + (
                " (" + ", ".join(f"{src} {n}" for src, n in info["sources"].items()) + ")"
                if set(info["sources"]) - {"human"}
                else ""
            ),
        ),
        (
            "embeddings",
            f"{info['with_embedding']} (dimension {info['embedding_dim']})"
            if info["with_embedding"]
            else "none",
        ),
        ("grade map", ",".join(f"{k}={v}" for k, v in gm.items()) if gm else "none (as written)"),
        *(
            [("version", f"{info['version']} (grown from '{info['parent'] or 'a deleted set'}')")]
            if info["version"] > 1
            else []
        ),
        ("runs", str(info["runs"])),
        ("content hash", f"sha256:{info['content_hash']}"),
    ]
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        click.echo(f"{key:<{width}}  {value}")
    emit(
        [{"grade": g, "judgements": n} for g, n in info["grades"].items()],
        "table",
        ["grade", "judgements"],
        title="grades",
    )
    if info["types"]:
        emit(
            [{"type": t, "queries": n} for t, n in info["types"].items()],
            "table",
            ["type", "queries"],
            title="query types",
        )


@testset.command()
@click.argument("name")
@pass_api
def delete(pg: Pgeval, name: str) -> None:
    """Delete test set NAME with its queries, judgements and runs.

    \b
    Examples:
      pgeval testset delete kb-v1
    """
    runs = pg.delete_testset(name)
    click.echo(f"deleted test set '{name}' and {runs} run(s) of it")
