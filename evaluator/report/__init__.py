"""Reports: JSON (the document every other form and `pgeval gate` read), Markdown, HTML, PNG plots.

:func:`obtain` turns what a user names on the command line (a run, an experiment, or a saved JSON
report) into that document; it connects to the database only when it has to."""

from __future__ import annotations

from pathlib import Path


def is_report_file(spec: str) -> bool:
    return Path(spec).is_file() or spec.lower().endswith(".json")


def obtain(database, spec: str, **build_kwargs) -> dict:
    """The JSON report of ``spec``: read from a file when it names one, else built from the run or
    experiment of that name (``build_kwargs`` go to :func:`evaluator.report.json.build`)."""
    from . import json as report_json

    if is_report_file(spec):
        data = report_json.read(spec)
        data["source"] = spec
        return data
    with database.connect(autocommit=True) as conn:
        return report_json.build(conn, spec, **build_kwargs)


def label(report: dict) -> str:
    run = report.get("run") or {}
    return str(run.get("name") or report.get("source") or "?")
