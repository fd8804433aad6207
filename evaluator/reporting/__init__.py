"""Reports: JSON (the document every other form and `pgeval gate` read), Markdown, HTML, PNG plots.

:func:`obtain` turns what a user names on the command line (a run, an experiment, or a saved JSON
report) into that document; it connects to the database only when it has to."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.db import Database


def is_report_file(spec: str) -> bool:
    return Path(spec).is_file() or spec.lower().endswith(".json")


def obtain(database: Database, spec: str, **build_kwargs: Any) -> dict:
    """The JSON report of ``spec``: read from a file when it names one, else built from the run or
    experiment of that name (``build_kwargs`` go to :func:`evaluator.reporting.json.build`)."""
    return obtain_all(database, [spec], **build_kwargs)[0]


def obtain_all(database: Database, specs: list[str], **build_kwargs: Any) -> list[dict]:
    """:func:`obtain` for each of ``specs``; the ones built from the database are all read in one
    snapshot (:func:`evaluator.core.db.snapshot`), so two sides of a comparison never straddle a
    concurrent delete or replace."""
    from contextlib import ExitStack

    from ..core.db import snapshot
    from . import json as report_json

    out = []
    with ExitStack() as stack:
        conn = None
        for spec in specs:
            if is_report_file(spec):
                data = report_json.read(spec)
                data["source"] = spec
                out.append(data)
                continue
            if conn is None:
                conn = stack.enter_context(snapshot(database))
            out.append(report_json.build(conn, spec, **build_kwargs))
    return out


def label(report: dict) -> str:
    run = report.get("run") or {}
    return str(run.get("name") or report.get("source") or "?")
