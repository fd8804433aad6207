"""`pgeval health --target NAME`: the knowledge base's health before anything is measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ...core.errors import PgevalError
from ..flags import EMBEDDER, STRICT, TARGET, TESTSET, format_option
from ..output import emit, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import Finding

COLORS = {"ok": "green", "hint": "cyan", "warning": "yellow", "error": "red"}


def show_findings(findings: list[Finding], fmt: str) -> None:
    """One line per check for people (long details stay readable); rows for scripts."""
    if fmt != "table":
        rows = [
            {
                "check": f.check,
                "status": f.status,
                "count": f.count,
                "detail": f.detail,
                "examples": ", ".join(f.examples),
            }
            for f in findings
        ]
        emit(rows, fmt, ["check", "status", "count", "detail", "examples"])
        return
    click.echo("health check")
    width = max(len(f.check) for f in findings)
    for f in findings:
        status = click.style(f"{f.status:<8}", fg=COLORS.get(f.status))
        examples = f" (e.g. {', '.join(f.examples)})" if f.examples and f.status != "ok" else ""
        click.echo(f"  {status} {f.check:<{width}}  {f.detail}{examples}")


@click.command()
@TARGET.but(help="Target to check (see `pgeval target list`).")
@TESTSET.but(
    help="Also check that its judged chunk ids exist in "
    "the target and that its embeddings have the target's dimension.",
)
@EMBEDDER.but(help="Which stored query embeddings to compare.")
@STRICT.but(help="Exit 1 when any check is not ok.")
@format_option()
@pass_api
def health(
    pg: Pgeval, target_name: str, testset: str | None, embedder: str | None, strict: bool, fmt: str
) -> None:
    """Check a target: the server's version (PostgreSQL 14 or newer), NULL and zero vectors,
    duplicate vectors, dimension mismatches, judged chunk ids missing from the target, vulnerable
    extension versions, the keyword stage's index (a hint with the CREATE INDEX to run when
    there is none), invalid indexes, ANN indexes larger than shared_buffers, whether the
    table's writes are counted (a hint naming `pgeval target track` when they are not).

    \b
    Warnings do not change the exit code unless --strict; an error finding (a dimension mismatch,
    relevant judged chunks missing from the target) is printed as such.

    \b
    Examples:
      pgeval health --target kb
      pgeval health --target kb --testset kb-v1 --format json
      pgeval health --target kb --strict        # in CI, before a sweep
    """
    findings = pg.health(target_name, testset=testset, embedder=embedder)
    if not printed_json(fmt, [f.as_dict() for f in findings]):
        show_findings(findings, fmt)
    shown = [f for f in findings if f.status != "ok"]
    for f in shown if fmt != "table" else ():
        warn(f"{f.check}: {f.detail}")
    bad = [f for f in shown if f.status != "hint"]  # a hint (a missing index) never fails
    if strict and bad:
        raise PgevalError(
            f"{len(bad)} health check(s) not ok: " + ", ".join(f.check for f in bad) + " (--strict)"
        )
