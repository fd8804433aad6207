"""`pgeval answers import|show|refusals`: end-to-end answers (citation precision, answer
accuracy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..flags import PER_QUERY, REPLACE, RUN, format_option
from ..output import emit, fixed, info, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.group()
def answers() -> None:
    """End-to-end answers of a RAG service, judged without calling any LLM.

    \b
    Import one JSON object per line and per query of the run's test set:
      {"query_id": "q1", "answer": "Refunds take 7 days.", "cited": ["c1", "c7"],
       "supported": ["c1"], "latency_ms": 812}
    citation precision = supported cited ids / cited ids (0 when an answerable query cites
    nothing, 1 when an unanswerable one cites nothing); an answer is correct when it contains
    every expected fact of the query, or a refusal phrase for an unanswerable query.
    The figures join `pgeval report` and `pgeval gate`.

    \b
    Examples:
      pgeval answers import answers.jsonl --run hnsw-ef40
      pgeval answers show hnsw-ef40 --per-query --format csv
      pgeval answers refusals --add "超出了我的知识范围"
    """


@answers.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@RUN
@REPLACE.but(help="Swap the run's existing answers for this file.")
@format_option(choices=("table", "json"))
@pass_api
def import_cmd(pg: Pgeval, file: str, run: str, replace: bool, fmt: str) -> None:
    """Validate FILE (JSONL) and store its answers for RUN, all or nothing.

    \b
    Examples:
      pgeval answers import answers.jsonl --run candidate
      pgeval answers import answers-v2.jsonl --run candidate --replace
    """
    imported = pg.import_answers(file, run, replace=replace)
    report, s = imported.report, imported.summary
    warn(*report.warnings)
    if printed_json(fmt, imported.as_dict()):
        return
    info(
        f"imported {report.imported} answers into run '{report.run}'"
        + (f" (replacing {report.replaced})" if report.replaced else "")
    )
    _print_summary(s)


def _print_summary(s: dict | None) -> None:
    if not s:
        return
    click.echo(
        f"citation precision {fixed(s['citation_precision'])} · answer accuracy "
        f"{fixed(s['answer_accuracy'])} (answerable {fixed(s['answerable_accuracy'])}, "
        f"unanswerable {fixed(s['unanswerable_accuracy'])})"
    )
    click.echo(
        f"queries {s['queries']}: answered {s['answered']}, no answer {s['no_answer']}, "
        f"unjudged (no expected facts) {s['unjudged']}, refusals {s['refused']}"
    )


@answers.command("show")
@click.argument("run")
@PER_QUERY
@format_option()
@pass_api
def show(pg: Pgeval, run: str, per_query: bool, fmt: str) -> None:
    """Citation precision and answer accuracy of RUN's imported answers.

    \b
    Examples:
      pgeval answers show candidate
      pgeval answers show candidate --per-query --format jsonl
    """
    s, rows = pg.answers(run, per_query=per_query)
    if per_query:
        assert rows is not None
        emit(
            rows,
            fmt,
            [
                "query_id",
                "answerable",
                "answered",
                "n_cited",
                "n_supported",
                "citation_precision",
                "refused",
                "n_facts",
                "facts_found",
                "answer_correct",
                "latency_ms",
            ],
            title=f"{run}: answers per query",
        )
    elif fmt == "table":
        _print_summary(s)
    else:
        emit([s], fmt, list(s))


@answers.command("refusals")
@click.option("--add", "add", multiple=True, metavar="PHRASE", help="Add a phrase (repeatable).")
@click.option(
    "--remove", "remove", multiple=True, metavar="PHRASE", help="Remove a phrase (repeatable)."
)
@click.option("--reset", is_flag=True, help="Go back to the built-in Chinese and English list.")
@format_option()
@pass_api
def refusals(
    pg: Pgeval, add: tuple[str, ...], remove: tuple[str, ...], reset: bool, fmt: str
) -> None:
    """List or edit the phrases that mark an answer as a refusal.

    An unanswerable query's answer is correct when it contains one of them (matched after NFKC
    normalisation, case-insensitively). The first edit starts from the built-in list.

    \b
    Examples:
      pgeval answers refusals
      pgeval answers refusals --add "超出了我的知识范围" --remove "我不知道"
      pgeval answers refusals --reset
    """
    phrases, default = pg.refusal_phrases(add=add, remove=remove, reset=reset)
    emit(
        [{"phrase": p} for p in phrases],
        fmt,
        ["phrase"],
        title="refusal phrases (built-in defaults)" if default else "refusal phrases (configured)",
    )
