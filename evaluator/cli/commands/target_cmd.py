"""`pgeval target add|list|show|remove`: where the knowledge base lives."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..flags import GROUP_BY, REPLACE, format_option
from ..output import echo_line, emit, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval

F = TypeVar("F", bound=Callable[..., Any])


def parse_where(items: tuple[str, ...]) -> dict[str, str | list[str]]:
    """('tenant=acme', 'kb=a', 'kb=b') -> {'tenant': 'acme', 'kb': ['a', 'b']}: a column given
    several values is filtered with IN."""
    from ...core.errors import InputError

    out: dict[str, str | list[str]] = {}
    for item in items:
        col, sep, value = item.partition("=")
        if not sep or not col.strip():
            raise InputError(f"'{item}' is not COLUMN=VALUE", field="--where")
        col = col.strip()
        if col in out:
            given = out[col]
            have = given if isinstance(given, list) else [given]
            if value in have:
                raise InputError(f"column '{col}' is given value '{value}' twice", field="--where")
            out[col] = have + [value]
        else:
            out[col] = value
    return out


@click.group()
def target() -> None:
    """Targets: the knowledge-base table a pipeline searches (chunk ids, vectors, text, filters).

    \b
    Examples:
      pgeval target add kb --table chunks --id-column id --vector-column embedding
      pgeval target list
    """


@target.command("add")
@click.argument("name")
@click.option("--table", help="Knowledge-base table (or view).")
@click.option("--schema", default=None, help="Schema of the table [default: the search_path].")
@click.option("--id-column", help="Column holding the chunk id (judgements name these ids).")
@click.option("--vector-column", help="vector or halfvec column.")
@click.option("--text-column", default=None, help="Text column for keyword search and reranking.")
@click.option(
    "--distance",
    type=click.Choice(["cosine", "l2", "ip"]),
    default=None,
    help="Distance of the index: cosine (<=>), l2 (<->), ip (<#>, negative inner "
    "product). [default: cosine]",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="COLUMN=VALUE",
    help="Fixed filter, repeatable (values are bound parameters, recorded in every run); "
    "one column given several values is filtered with IN (v1, v2, ...).",
)
@click.option(
    "--null-as-true",
    "null_true",
    multiple=True,
    metavar="COLUMN",
    help="The --where filter on COLUMN also passes NULL: (COLUMN IS NULL OR COLUMN = "
    "VALUE), for a flag whose NULL means true. Repeatable.",
)
@click.option(
    "--min-similarity",
    type=float,
    default=None,
    help="Drop vector results under this similarity (cosine: 1 - distance; ip: the "
    "inner product), as the application does; the stage report counts them.",
)
@click.option(
    "--max-distance",
    type=float,
    default=None,
    help="Drop vector results past this distance (any distance); counted likewise.",
)
@click.option(
    "--dimension",
    type=click.IntRange(1, 16000),
    default=None,
    help="Query dimension (required for an untyped column of mixed dimensions).",
)
@click.option(
    "--dimension-column",
    default=None,
    help="Column holding each row's dimension: search only rows with the dimension of "
    "--dimension and cast the column to type(N) so a partial index is usable.",
)
@click.option(
    "--preset",
    type=click.Choice(["weknora"]),
    default=None,
    help="A known layout: weknora = table embeddings, halfvec column embedding, "
    "chunk_id, content, partial HNSW per dimension, is_enabled filter.",
)
@click.option(
    "--knowledge-base-id",
    multiple=True,
    help="weknora: restrict to these knowledge bases (repeatable: IN (...)).",
)
@click.option(
    "--knowledge-id",
    multiple=True,
    help="weknora: restrict to these knowledge ids (documents; repeatable).",
)
@click.option("--tag-id", multiple=True, help="weknora: restrict to these tag ids (repeatable).")
@GROUP_BY.but(
    help="The column the application scopes each search by (a tenant, e.g. knowledge_base_id): "
    "sweeps on this target then measure recall per group (see `pgeval sweep --group-by`).",
)
@click.option(
    "--statement",
    metavar="SQL",
    default=None,
    help="The application's own search statement, which then defines the target: one SELECT "
    "with $1 the query vector (and $2 the --group-by value), returning the --id-column and a "
    "column named distance, with ORDER BY and LIMIT, e.g. 'SELECT id, embedding <=> $1 AS "
    "distance FROM docs WHERE tenant = $2 ORDER BY embedding <=> $1 LIMIT 10'. Sweeps, "
    "--find, watch and pipelines time it as written; its exact twin (index scans off) is the "
    "ground truth. Checked on one row now.",
)
@click.option(
    "--statement-file",
    metavar="PATH",
    default=None,
    help="Read --statement from a file (UTF-8).",
)
@REPLACE.but(help="Replace a target of the same name.")
@format_option(choices=("table", "json"))
@pass_api
def add(pg: Pgeval, name: str, where: tuple[str, ...], fmt: str, **options: Any) -> None:
    """Add a target after checking its table, columns, vector type and dimension in the catalog.

    \b
    Examples:
      pgeval target add kb --table chunks --id-column chunk_id --vector-column embedding \\
          --text-column content --distance cosine --where tenant=acme
      pgeval target add wk --preset weknora --dimension 1024 --knowledge-base-id kb-123 \\
          --knowledge-base-id kb-456 --min-similarity 0.5
      pgeval target add tenants --preset weknora --dimension 1024 \\
          --group-by knowledge_base_id
      pgeval target add kb2 --table chunks --id-column chunk_id --vector-column embedding \\
          --where tenant=acme --where tenant=beta --where enabled=true --null-as-true enabled
      pgeval target add app --table docs --id-column id --vector-column embedding \\
          --group-by tenant --statement 'SELECT id, embedding <=> $1 AS distance FROM docs
          WHERE tenant = $2 ORDER BY embedding <=> $1 LIMIT 10'
      pgeval target add app2 --table docs --id-column id --vector-column embedding \\
          --statement-file search.sql
    """
    # the other options go to the API under their names (their lists as tuples)
    added = pg.add_target(name, where=parse_where(where), **options)
    tg, indexes, warnings = added.target, added.indexes, added.warnings
    warn(*warnings)
    if printed_json(fmt, added.as_dict()):
        return
    echo_line(
        f"target '{name}': {tg.qualified()} ({tg.id_column}, {tg.vector_column} "
        f"{tg.vector_type}({tg.dimension or '?'}), {tg.distance}); "
        f"{len(indexes)} vector index(es)" + ("; searched by its statement" if tg.statement else "")
    )


@target.command("list")
@format_option()
@pass_api
def list_(pg: Pgeval, fmt: str) -> None:
    """List targets.

    \b
    Examples:
      pgeval target list
      pgeval target list --format json
    """
    rows = pg.targets()
    emit(
        rows,
        fmt,
        [
            "target",
            "table",
            "id_column",
            "vector_column",
            "type",
            "dimension",
            "distance",
            "text_column",
            "filters",
            "preset",
            "statement",
        ],
        wide_only=["id_column", "type", "filters", "preset", "statement"],
    )


@target.command("show")
@click.argument("name")
@format_option(choices=("table", "json"))
@pass_api
def show(pg: Pgeval, name: str, fmt: str) -> None:
    """Show a target's definition and the vector indexes the knowledge base has for it.

    \b
    Examples:
      pgeval target show kb
      pgeval target show kb --format json
    """
    shown = pg.target(name)
    if printed_json(fmt, shown):
        return
    for key, value in shown["spec"].items():
        if key != "statement_template":  # (the statement as pgeval's SQL reader read it)
            echo_line(f"{key}: {_shown(key, value)}")
    log = shown["change_log"]
    tracked = f"tracked ({log['count']:,} write statements counted)" if log["tracked"] else "no"
    click.echo(f"change log: {tracked}")
    emit(shown["indexes"], fmt, ["name", "method", "opclass", "predicate"], title="vector indexes")


def _shown(key: str, value: object) -> str:
    """A definition's value for people: no schema is the search_path's, no filters none, an
    unset field a dash (JSON shows null and {})."""
    if key == "schema" and value is None:
        return "— (the search_path's)"
    if value in (None, {}, []):
        return "none" if key == "filters" else "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if key == "statement":  # on one line
        return " ".join(str(value).split())
    return str(value)


@target.command("remove")
@click.argument("name")
@pass_api
def remove(pg: Pgeval, name: str) -> None:
    """Remove a target (runs that used it keep its definition in their configuration).

    \b
    Examples:
      pgeval target remove kb
    """
    pg.remove_target(name)
    click.echo(f"removed target '{name}'")


def lock_timeout_option() -> Callable[[F], F]:
    return click.option(
        "--lock-timeout",
        default="5s",
        show_default=True,
        metavar="DURATION",
        help="Wait at most this long for the table's lock (the application's writes queue "
        "behind a waiting DDL statement); nothing is changed when it runs out.",
    )


@target.command("track")
@click.argument("name")
@lock_timeout_option()
@format_option(choices=("table", "json"))
@pass_api
def track(pg: Pgeval, name: str, lock_timeout: str, fmt: str) -> None:
    """Count the write statements on the target's table, so that probes, sweeps and runs know
    the data is unchanged without a pass over the table (docs/watch.md, "The change log").

    Adds schema pgeval_changes (a log table, two functions) to the knowledge base and one
    statement-level trigger, ENABLE ALWAYS, to the table: each INSERT, UPDATE, DELETE, COPY or
    TRUNCATE appends one row to the log in its own transaction (no lock another writer waits
    for). Needs CREATE on the database and ownership of the table; plain tables only. Running it
    again is harmless (it also folds the table's log rows into one). `pgeval target untrack`
    removes it.

    \b
    Examples:
      pgeval target track kb
      pgeval target track kb --lock-timeout 2s --format json
    """
    out = pg.track_changes(name, lock_timeout=lock_timeout)
    if printed_json(fmt, out):
        return
    how = "now tracked" if out["installed"] else "already tracked"
    click.echo(
        f"target '{name}': table {out['table']} {how} (trigger {out['trigger']}); "
        f"{out['count']:,} write statements counted so far"
    )


@target.command("untrack")
@click.argument("name")
@lock_timeout_option()
@format_option(choices=("table", "json"))
@pass_api
def untrack(pg: Pgeval, name: str, lock_timeout: str, fmt: str) -> None:
    """Drop the change-log trigger of the target's table and its rows of the log (schema
    pgeval_changes stays for other tables); pgeval goes back to the version scan.

    \b
    Examples:
      pgeval target untrack kb
    """
    out = pg.untrack_changes(name, lock_timeout=lock_timeout)
    if printed_json(fmt, out):
        return
    click.echo(f"target '{name}': table {out['table']} no longer tracked")
