"""The `pgeval` command: a thin click group. Every command lives in ``evaluator/cli/commands/`` and
calls a library function; modules load lazily so that `pgeval metrics RUN` starts fast.

Errors: library code raises :mod:`evaluator.core.errors`; :func:`main` turns them into one line on
stderr and the exit code (1 error, 2 a release gate failed). Never a traceback for a user mistake.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import click

from .help_format import HelpContext, adopt

if TYPE_CHECKING:
    from ..core.db import Database

# command name -> "module:attribute" (add a line per command; names are a contract with scripts and docs: add, never rename)
COMMANDS = {
    "advise": "evaluator.cli.commands.advise_cmd:advise",
    "answers": "evaluator.cli.commands.answers_cmd:answers",
    "compare": "evaluator.cli.commands.compare_cmd:compare",
    "db": "evaluator.cli.commands.db_cmd:db",
    "demo": "evaluator.demo.command:demo",
    "diff": "evaluator.cli.commands.diff_cmd:diff",
    "embed": "evaluator.cli.commands.embed_cmd:embed",
    "fingerprint": "evaluator.cli.commands.fingerprint_cmd:fingerprint",
    "gate": "evaluator.cli.commands.gate_cmd:gate",
    "health": "evaluator.cli.commands.health_cmd:health",
    "init": "evaluator.cli.commands.init_cmd:init",
    "metrics": "evaluator.cli.commands.metrics_cmd:metrics",
    "plans": "evaluator.cli.commands.plans_cmd:plans",
    "queries": "evaluator.cli.commands.queries_cmd:queries",
    "report": "evaluator.cli.commands.report_cmd:report",
    "run": "evaluator.cli.commands.run_cmd:run",
    "stage-report": "evaluator.cli.commands.stage_report_cmd:stage_report",
    "sweep": "evaluator.cli.commands.sweep_cmd:sweep",
    "target": "evaluator.cli.commands.target_cmd:target",
    "testset": "evaluator.cli.commands.testset_cmd:testset",
    "tune": "evaluator.cli.commands.tune_cmd:tune",
    "warmup": "evaluator.cli.commands.warmup_cmd:warmup",
    "watch": "evaluator.cli.commands.watch_cmd:watch",
}


class LazyGroup(click.Group):
    context_class = HelpContext  # help fitted to the terminal (cli/help_format.py)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return adopt(getattr(importlib.import_module(module), attr))


class Context:
    """What every command gets as ``ctx.obj``: where the database is."""

    def __init__(self, dsn: str | None, datadir: str | None, results_dsn: str | None) -> None:
        self._args = (dsn, datadir, results_dsn)
        self._db: Database | None = None

    @property
    def db(self) -> Database:
        if self._db is None:
            from ..core.db import Database

            self._db = Database.resolve(*self._args)
        return self._db


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--dsn",
    metavar="DSN",
    help="PostgreSQL connection string of the knowledge base "
    "(else $PGEVAL_DSN, else the libpq PG* variables, else the embedded server).",
)
@click.option(
    "--datadir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Data directory of the embedded server (else $PGEVAL_DATADIR, else a per-user "
    "data directory).",
)
@click.option(
    "--results-dsn",
    metavar="DSN",
    help="Where schema pgeval lives when it is not the "
    "knowledge base's database (else $PGEVAL_RESULTS_DSN).",
)
@click.version_option(package_name="pgeval", prog_name="pgeval")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, datadir: str | None, results_dsn: str | None) -> None:
    """pgeval: evaluate retrieval of a RAG knowledge base inside PostgreSQL.

    \b
    Typical flow:
      pgeval db start                       # embedded PostgreSQL 18 + pgvector + pgvectorscale
      pgeval init                           # schema pgeval (tables, SQL metric functions)
      pgeval testset load cases.jsonl --name kb-v1
      pgeval run import run.trec --format trec --testset kb-v1 --name bm25
      pgeval metrics bm25                   # Recall@3/5/10, MRR@20, nDCG@5/10, ...

    Metrics are computed by SQL functions in schema pgeval; their definitions: docs/METRICS.md.

    \b
    Examples:
      pgeval demo
      pgeval --dsn "$DSN" init
      pgeval sweep --help
    """
    ctx.obj = Context(dsn, datadir, results_dsn)


def _remember_secrets(argv: list[str] | None) -> None:
    """Every password or key on the command line or in PGEVAL_*DSN, masked in any message."""
    from ..core import masking

    masking.forget()
    masking.remember(
        *(argv if argv is not None else sys.argv[1:]),
        *(os.environ.get(v) for v in ("PGEVAL_DSN", "PGEVAL_RESULTS_DSN")),
    )


def main(argv: list[str] | None = None) -> int:
    from ..core.errors import PgevalError, first_line
    from ..core.masking import mask as redact

    _remember_secrets(argv)
    try:
        code = cli.main(args=argv, prog_name="pgeval", standalone_mode=False)
        if type(code) is int:  # a command's ctx.exit(N) (no command returns a value)
            return code
    except PgevalError as exc:
        from .options import option_for

        click.echo(f"pgeval: error: {redact(exc.text(option_for))}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("pgeval: interrupted", err=True)
        return 130
    except click.UsageError as exc:  # exit 2 means "gate failed": a usage mistake is an error (1)
        if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
            click.echo(exc.format_message())  # a bare `pgeval` / `pgeval run`: the help
            return 0
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        message = " ".join(exc.format_message().split())
        click.echo(f"pgeval: error: {redact(message)}{hint}", err=True)
        return 1
    except click.ClickException as exc:
        click.echo(f"Error: {redact(exc.format_message())}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("pgeval: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a path the user gave: missing folder, no permission, disk full
        if exc.filename is None or os.environ.get("PGEVAL_DEBUG"):
            raise
        click.echo(
            f"pgeval: error: {redact(str(exc.filename))}: {redact(exc.strerror or str(exc))}",
            err=True,
        )
        return 1
    except Exception as exc:  # a database error that no library call wrapped
        if exc.__class__.__module__.startswith("psycopg") and not os.environ.get("PGEVAL_DEBUG"):
            first = first_line(exc)
            if getattr(exc, "sqlstate", None) in ("42P01", "42883", "3F000") and "pgeval" in first:
                click.echo(
                    f"pgeval: error: schema pgeval is missing or out of date in this "
                    f"database ({redact(first)}): run `pgeval init`",
                    err=True,
                )
                return 1
            click.echo(f"pgeval: database error: {redact(first)}", err=True)
            return 1
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
