"""`pgeval testset holes|grade`: the unjudged chunks of an experiment's top K out to people (and
optionally a model judge), their grades back into a new version of the test set
(docs/judging.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import API_KEY_ENV, BASE_URL, DEPTH, NAME, OUT, TESTSET, format_option
from ..output import echo_line, printed_json, warn
from .common import OneTask, pass_api

if TYPE_CHECKING:
    from ...api import Pgeval

_JSON = ("table", "json")


@click.command()
@click.argument("experiment")
@DEPTH.but(
    type=click.IntRange(1, 1000), default=10, show_default=True, help="The top K of every list."
)
@OUT.but(required=True, help="The CSV file to write (for a spreadsheet: formulas neutralised).")
@click.option(
    "--judge",
    metavar="SPEC",
    default=None,
    help="A model judge, openai:MODEL (an OpenAI-compatible /chat/completions), grades the "
    "holes and the judged chunks of the pool; its grades are stored apart and its agreement "
    "with the human grades (Cohen's kappa, confusion table) printed.",
)
@BASE_URL.but(help="--judge: endpoint base [default: $OPENAI_BASE_URL, else api.openai.com/v1].")
@API_KEY_ENV.but(
    help="--judge: environment variable holding the API key "
    "[default: OPENAI_API_KEY; '' sends none]. The key is never printed."
)
@format_option(choices=_JSON)
@pass_api
def holes(
    pg: Pgeval,
    experiment: str,
    out: str,
    judge: str | None,
    fmt: str,
    **options: Any,
) -> None:
    """Write the unjudged chunks of EXPERIMENT's top K (every stage, every repetition) to a CSV
    file for annotators: test set, query id and text, chunk id and text, the stages and ranks it
    was seen at, and an empty grade column to fill with 0-3.

    \b
    Read the grades back with `pgeval testset grade FILE`: a new version of the test set.
    A model judge's grades never enter a test set unless `testset grade --model-grades` asks.

    \b
    Examples:
      pgeval testset holes cran-demo --depth 10 --out pool.csv
      pgeval testset holes cran-demo --out pool.csv --judge openai:gpt-4o-mini
      pgeval testset holes cran-demo --out pool.csv --judge openai:qwen2.5:7b \\
          --base-url http://localhost:11434/v1 --api-key-env ''
    """
    with OneTask() as bar:
        report = pg.testset_holes(
            experiment,
            out,
            judge=judge,
            on_progress=lambda done, total: bar.show(f"judge {judge}", done, total),
            **options,
        )
    if printed_json(fmt, report.as_dict()):
        return
    r = report.as_dict()
    echo_line(
        f"experiment {r['experiment']} · test set {r['testset']} · top {r['depth']} of every "
        f"list: {r['pooled']} distinct chunks, {r['holes']} of them unjudged, over "
        f"{r['queries']} queries"
    )
    echo_line(
        f"wrote {r['out']}: fill its 'grade' column (0-3), then `pgeval testset grade {r['out']}`"
    )
    if not report.chunk_text and report.holes:
        warn("the experiment's target has no text column: the file's chunk column is empty")
    if report.agreement is not None:
        echo_line(
            f"judge {report.agreement.judge}: graded {report.model_graded} holes (stored apart, "
            "in pgeval.model_grade)"
        )
        _agreement(report.agreement)
        echo_line(
            f"its grades enter a test set only with `pgeval testset grade {r['out']} "
            f"--model-grades {report.agreement.judge}`"
        )


def _agreement(a: Any) -> None:
    """A judge's agreement (``evaluator.testset.judging.Agreement``) in words."""
    kappa = "n/a" if a.kappa is None else f"{a.kappa:.3f}"
    echo_line(
        f"agreement with the human grades on {a.compared} judged chunks: Cohen's kappa {kappa}, "
        f"{a.agreed} equal"
    )
    for line in a.table():
        click.echo("  " + line)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@TESTSET.but(help="The test set graded [default: the file's testset column].")
@NAME.but(help="Name of the new version [default: ROOT@vN, N the next version number].")
@click.option(
    "--model-grades",
    metavar="JUDGE",
    default=None,
    help="Take this judge's stored grades (`testset holes --judge`) for the rows left "
    "ungraded; they are marked as the judge's, and its agreement is printed first.",
)
@format_option(choices=_JSON)
@pass_api
def grade(pg: Pgeval, file: str, fmt: str, **options: Any) -> None:
    """Read the grades of a pool FILE (`pgeval testset holes`) into a new version of its test
    set: its judgements and the file's. Rows with an empty grade are left out.

    \b
    Any bad row (a grade not 0-3, an unknown query or chunk id, a chunk judged already, a
    column missing) stops it with file, line and field named and nothing written. The runs
    of the old version keep their figures: run the pipeline on the new one.

    \b
    Examples:
      pgeval testset grade pool.csv
      pgeval testset grade pool.csv --testset cran --name cran-graded
      pgeval testset grade pool.csv --model-grades openai:qwen-plus
    """
    r = pg.grade_testset(file, **options)  # the options under their names
    if printed_json(fmt, r.as_dict()):
        return
    if r.agreement is not None:
        _agreement(r.agreement)
    if r.unchanged:
        echo_line(f"test set '{r.name}' (version {r.version}) holds these grades already")
        return
    echo_line(
        f"wrote test set '{r.name}' (id {r.testset_id}), version {r.version} of '{r.parent}': "
        f"{r.judgements} judgements, {r.human} new from {r.source_file}"
        + (f", {r.model} from judge {r.model_judge}" if r.model_judge else "")
        + (f"; {r.ungraded} rows left ungraded" if r.ungraded else "")
    )
