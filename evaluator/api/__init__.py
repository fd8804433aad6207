"""The Python API: what the command line does, callable from a notebook or a script.

    import evaluator.api as pgeval

    pg = pgeval.connect()                       # the embedded server (or a DSN: connect("postgresql://..."))
    pg.init()
    pg.load_testset("cases.jsonl", name="kb-v1")
    pg.add_target("kb", table="chunks", id_column="chunk_id", vector_column="embedding")
    res = pg.run_pipeline(testset="kb-v1", target="kb", stages="exact,hnsw",
                          settings={"hnsw.ef_search": 40}, repeat=1)
    report = pg.stage_report(res.experiment)    # a StageReport; report.as_dict() is the JSON
    sw = pg.sweep(sample_queries=300, target="kb", stage="hnsw",   # no test set: query vectors
                  params={"hnsw.ef_search": [10, 20, 40, 80]})    # sampled from the table

Every method returns a dataclass (with ``as_dict()`` giving what ``--format json`` prints) or plain
dicts and lists; the figures are the command line's, read from the same SQL. Errors are the typed
errors of :mod:`evaluator.core.errors`; their messages name this API's parameters (``testset``,
``settings``, ``replace=True``), not the command line's options.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.db import Database
from .captured import CapturedMethods
from .dba import DbaMethods
from .numbers import NumberMethods, PlanMethods, ReportMethods
from .runs import RunMethods
from .setup import EmbedMethods, SetupMethods

__all__ = ["Pgeval", "connect"]


@dataclass
class Pgeval(
    SetupMethods,
    EmbedMethods,
    RunMethods,
    NumberMethods,
    PlanMethods,
    ReportMethods,
    DbaMethods,
    CapturedMethods,
):
    """A connection to pgeval's database (the knowledge base and, unless ``results_dsn`` says
    otherwise, the results). Cheap: every method opens and closes its own connections. One
    method per use case; the command line calls them (setup: :mod:`.setup`, runs and sweeps:
    :mod:`.runs`, numbers: :mod:`.numbers`, tuning: :mod:`.dba`)."""

    database: Database


def connect(
    dsn: str | None = None, *, datadir: str | Path | None = None, results_dsn: str | None = None
) -> Pgeval:
    """pgeval on the database ``dsn``; without one, resolved as the command line does
    (``PGEVAL_DSN``, the libpq ``PG*`` variables, else the embedded server in ``datadir``, started
    on first use). Nothing connects until a method is called."""
    return Pgeval(Database.resolve(dsn, None if datadir is None else str(datadir), results_dsn))
