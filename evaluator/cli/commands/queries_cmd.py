"""`pgeval queries capture|list|show|delete|export|measure`: the application's own searches,
captured from PostgreSQL's server log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import NAME, OUT, PARAM, REPLACE, TARGET, TARGET_RECALL, format_option
from ..output import echo_line, emit, printed_json
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


@click.group()
def queries() -> None:
    """The application's own queries, captured from PostgreSQL's server log.

    A sampled row of the table is not a query: it is a node of the index it searches, and on a
    large HNSW table its recall is higher than the application's (0.95 against 0.875 on one
    200,000-row table). The server can log every search with its vector; `capture` keeps the
    target's searches, each statement reduced to its shape, and `--captured SET` measures them.

    \b
    Examples:
      pgeval queries capture --how                      # the settings that log the searches
      pgeval queries capture /var/log/postgresql/postgresql-16-main.log --target kb --name week49
      pgeval queries capture pg.csv.gz --target kb --name week49 --append --since '2026-12-07'
      pgeval queries list
      pgeval queries show week49
      pgeval queries measure week49 --param hnsw.ef_search=20,40,80
      pgeval sweep --target kb --captured week49 --find hnsw.ef_search
      pgeval queries export week49 --out week49.npy
    """


@queries.command()
@click.argument("logfile", nargs=-1, type=click.Path(dir_okay=False))
@TARGET.but(required=False, help="Target whose searches to keep.")
@NAME.but(metavar="SET", help="Name of the captured set.")
@click.option(
    "--log-format",
    type=click.Choice(["auto", "stderr", "csvlog", "jsonlog"]),
    default="auto",
    show_default=True,
    help="The log's format (auto: .csv and .json names, else the first line).",
)
@click.option(
    "--log-line-prefix",
    metavar="PREFIX",
    help="stderr logs: the server's log_line_prefix [default: read from the server].",
)
@click.option("--since", metavar="TIME", help="Only searches logged at or after TIME.")
@click.option("--until", metavar="TIME", help="Only searches logged before TIME.")
@click.option(
    "--max",
    type=int,
    metavar="N",
    help="Keep N distinct queries, the same N for the same log (chosen by their ids).",
)
@click.option("--append", is_flag=True, help="Add the searches to an existing set.")
@REPLACE.but(help="Capture an existing set anew.")
@click.option("--how", is_flag=True, help="Print the statements that log the searches, and stop.")
@format_option(choices=("table", "json"))
@pass_api
def capture(
    pg: Pgeval,
    logfile: tuple[str, ...],
    target_name: str | None,
    name: str | None,
    how: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Keep the searches of a target found in PostgreSQL log files (LOGFILE..., plain or gzip;
    stderr, csvlog or jsonlog).

    A search is a statement that orders the target's vector column by a distance operator
    (<->, <=>, <#>, <+>, <~>, <%>) under a LIMIT, its vector a bind parameter (any position)
    or an inline literal. Each is reduced to its shape (parameters in place of literals); the
    bind and parse lines of a prepared execution are not counted again; the other values (a
    tenant) are kept as sent, with how often and when. A log whose vectors are missing or cut
    (log_parameter_max_length) is refused.

    \b
    Examples:
      pgeval queries capture --how
      pgeval queries capture /var/lib/postgresql/16/main/log/postgresql-*.log --target kb --name w49
      pgeval queries capture pg.csv.gz pg.json --target kb --name w49 --since '2026-12-07 08:00'
      pgeval queries capture today.log --target kb --name w49 --append --max 2000
    """
    from ...api import vocabulary

    if how:
        click.echo(vocabulary.CAPTURE_HOW, nl=False)
        return
    from ...core.errors import InputError, param

    for opt, value in (("target", target_name), ("name", name)):
        if value is None:
            raise InputError(f"{param(opt)} is required (or {param('how')})", field=param(opt))
    if not logfile:
        raise InputError("give the log file(s) to read (`pgeval queries capture --how`)")
    assert target_name is not None and name is not None
    # the other options go to the API under their names
    report = pg.capture_queries(list(logfile), target=target_name, name=name, **options)
    if printed_json(fmt, report.as_dict()):
        return
    verb = "added to" if report.appended else "captured"
    echo_line(
        f"{verb} '{report.name}' (target {report.target}): {report.queries} queries of "
        f"{len(report.shapes)} shape(s), from {report.searches} searches in "
        f"{report.entries} log entries ({report.found} distinct)"
    )
    emit(
        [{k: s[k] for k in ("shape", "queries", "sent", "k", "values", "statement")}
         for s in report.shapes],
        "table",
    )  # fmt: skip
    for reason, n in report.skipped.items():
        echo_line(f"skipped {n}: {reason}")


@queries.command(name="list")
@format_option(choices=("table", "json", "jsonl", "csv"))
@pass_api
def list_(pg: Pgeval, fmt: str) -> None:
    """The captured sets: target, shapes, queries, searches sent, first and last seen.

    \b
    Examples:
      pgeval queries list
      pgeval queries list --format json
    """
    emit(pg.captured_sets(), fmt)


@queries.command()
@click.argument("name")
@format_option(choices=("table", "json"))
@pass_api
def show(pg: Pgeval, name: str, fmt: str) -> None:
    """A captured set: each shape (statement, LIMIT, queries, searches sent) and the values its
    other parameters were sent with (a tenant), most sent first.

    \b
    Examples:
      pgeval queries show w49
      pgeval queries show w49 --format json
    """
    got = pg.captured_set(name)
    if printed_json(fmt, got):
        return
    echo_line(
        f"captured set '{got['name']}': target {got['target']}, {got['dimension']} dimensions, "
        f"{len(got['captures'])} capture(s), last {got['updated_at']}"
    )
    emit(got["shapes"], "table", ["shape", "queries", "sent", "k", "first_seen", "last_seen",
                                  "statement"])  # fmt: skip
    if got["values"]:
        emit(got["values"], "table", title="values sent")


@queries.command()
@click.argument("name")
@pass_api
def delete(pg: Pgeval, name: str) -> None:
    """Delete a captured set.

    \b
    Examples:
      pgeval queries delete w49
    """
    pg.delete_captured(name)
    echo_line(f"deleted captured set '{name}'")


@queries.command()
@click.argument("name")
@OUT.but(required=True, help="A .npy or .jsonl file.")
@click.option("--shape", type=int, help="Only this shape's queries.")
@pass_api
def export(pg: Pgeval, name: str, out: str, shape: int | None) -> None:
    """Write a set's query vectors: .npy (one row a query, in query id order) or JSONL
    ({"id", "embedding", "shape", "params", "sent"}, readable by --queries-file).

    \b
    Examples:
      pgeval queries export w49 --out w49.npy
      pgeval queries export w49 --shape 2 --out w49-tenant.jsonl
    """
    n = pg.export_captured(name, out, shape=shape)
    echo_line(f"wrote {n} queries to {out}")


@queries.command()
@click.argument("name")
@PARAM
@click.option("--sweep", "sweep_name", metavar="NAME", help="Name of the sweeps stored.")
@REPLACE.but(help="Measure again under a sweep name taken.")
@TARGET_RECALL
@format_option(choices=("table", "json", "jsonl", "csv"))
@pass_api
def measure(
    pg: Pgeval,
    name: str,
    params: tuple[str, ...],
    sweep_name: str | None,
    replace: bool,
    target_recall: float,
    fmt: str,
) -> None:
    """Measure each shape of a captured set as the application sent it: its statement, LIMIT
    and values, under the planner's own plan, against its exact twin (the same statement with
    approximate index scans off). One row per shape and point; weighted_recall is the recall
    over all shapes weighted by the searches each was sent (pgeval.evaluate_captured); then the
    first point where every shape reaches --target-recall, or the shape that does not and what
    it reaches.

    \b
    Examples:
      pgeval queries measure w49 --param hnsw.ef_search=20,40,80
      pgeval queries measure w49 --param hnsw.ef_search=40 --param hnsw.iterative_scan=off,relaxed_order
    """
    got = pg.measure_captured(
        name, list(params), sweep=sweep_name, replace=replace, target_recall=target_recall
    )
    if printed_json(fmt, got):
        return
    emit(got["rows"], fmt, ["shape", "share", "label", "at_k", "recall", "margin95", "p95_ms",
                            "n_queries", "index_type", "weighted_recall"])  # fmt: skip
    if fmt == "table":
        echo_line(_verdict_line(got["verdict"]))


def _verdict_line(v: dict) -> str:
    """Where every shape reaches the target, or which shapes do not and what they reach."""
    t = v["target_recall"]
    if v["point"] is not None:
        return f"every shape reaches recall {t} from {v['point']} (the first such point measured)"
    missed = [
        f"shape {s['shape']} "
        + (f"only from {s['reaches_at']}" if s["reaches_at"] else
           f"at no point measured (best {s['best']:.4f} at {s['best_at']})")
        for s in v["shapes"]
    ]  # fmt: skip
    return f"no point reaches recall {t} in every shape: " + "; ".join(missed)
