"""`pgeval answers import|show|refusals`: end-to-end answers (citation precision, answer
accuracy)."""

from __future__ import annotations

import click

from ..output import emit, format_option, info, to_json, warn
from .common import pass_db


@click.group()
def answers():
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
@click.option(
    "--run",
    "run",
    required=True,
    metavar="RUN",
    help="The run the answers were generated from (its test set names the queries).",
)
@click.option("--replace", is_flag=True, help="Swap the run's existing answers for this file.")
@format_option(choices=("table", "json"))
@pass_db
def import_cmd(database, file, run, replace, fmt):
    """Validate FILE (JSONL) and store its answers for RUN, all or nothing.

    \b
    Examples:
      pgeval answers import answers.jsonl --run candidate
      pgeval answers import answers-v2.jsonl --run candidate --replace
    """
    from ...measure import answers as a

    with database.connect(autocommit=True) as conn:
        report = a.import_answers(conn, file, run, replace=replace)
        s = a.summary(conn, a.resolve_run(conn, run).run_id)
    for w in report.warnings:
        warn(w)
    if fmt == "json":
        click.echo(
            to_json(
                {
                    "run": report.run,
                    "file": report.file,
                    "imported": report.imported,
                    "replaced": report.replaced,
                    "summary": s,
                    "warnings": report.warnings,
                }
            )
        )
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
        f"citation precision {_f(s['citation_precision'])} · answer accuracy "
        f"{_f(s['answer_accuracy'])} (answerable {_f(s['answerable_accuracy'])}, "
        f"unanswerable {_f(s['unanswerable_accuracy'])})"
    )
    click.echo(
        f"queries {s['queries']}: answered {s['answered']}, no answer {s['no_answer']}, "
        f"unjudged (no expected facts) {s['unjudged']}, refusals {s['refused']}"
    )


def _f(v) -> str:
    return "—" if v is None else f"{v:.4f}"


@answers.command("show")
@click.argument("run")
@click.option("--per-query", is_flag=True, help="One row per query of the test set.")
@format_option()
@pass_db
def show(database, run, per_query, fmt):
    """Citation precision and answer accuracy of RUN's imported answers.

    \b
    Examples:
      pgeval answers show candidate
      pgeval answers show candidate --per-query --format jsonl
    """
    from ...core.db import snapshot
    from ...core.errors import NotFound
    from ...measure import answers as a

    with snapshot(database) as conn:
        info_ = a.resolve_run(conn, run)
        if not a.has_answers(conn, info_.run_id):
            raise NotFound(
                f"run '{run}' has no answers (import them with `pgeval answers "
                "import FILE --run RUN`)"
            )
        s = a.summary(conn, info_.run_id)
        rows = a.per_query(conn, info_.run_id) if per_query else None
    assert s is not None  # the run has answers, so its test set has queries
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
@pass_db
def refusals(database, add, remove, reset, fmt):
    """List or edit the phrases that mark an answer as a refusal.

    An unanswerable query's answer is correct when it contains one of them (matched after NFKC
    normalisation, case-insensitively). The first edit starts from the built-in list.

    \b
    Examples:
      pgeval answers refusals
      pgeval answers refusals --add "超出了我的知识范围" --remove "我不知道"
      pgeval answers refusals --reset
    """
    from ...measure import answers as a

    with database.connect(autocommit=True) as conn:
        if add or remove or reset:
            a.set_refusal_phrases(conn, add=list(add), remove=list(remove), reset=reset)
        phrases, default = a.refusal_phrases(conn)
    emit(
        [{"phrase": p} for p in phrases],
        fmt,
        ["phrase"],
        title="refusal phrases (built-in defaults)" if default else "refusal phrases (configured)",
    )
