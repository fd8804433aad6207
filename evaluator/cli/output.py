"""Printing results: `table` for people (rich), `json`, `jsonl`, `csv` for scripts.

Commands build plain data (lists of dicts, dicts) and hand it here; nothing else prints tables.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from typing import Any, Iterable, Sequence

import click

FORMATS = ("table", "json", "jsonl", "csv")


def format_option(default: str = "table", choices: Sequence[str] = FORMATS):
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default,
                        show_default=True, help="Output format: table for people, json/jsonl/csv "
                        "for scripts.")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def to_json(data: Any) -> str:
    return json.dumps(data, default=_clean, ensure_ascii=False, indent=2, sort_keys=False)


def fmt_value(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def table(rows: Iterable[dict], columns: Sequence[str] | None = None, title: str | None = None,
          file=None, digits: int = 4) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    columns = list(columns or (rows[0].keys() if rows else []))
    t = Table(title=title, show_lines=False, header_style="bold")
    for col in columns:
        numeric = any(isinstance(r.get(col), (int, float)) and not isinstance(r.get(col), bool)
                      for r in rows)
        t.add_column(col, justify="right" if numeric else "left")
    for r in rows:
        t.add_row(*(fmt_value(r.get(c), digits) for c in columns))
    out = file or sys.stdout
    # a pipe or a file gets the whole table, not one cut to 80 columns
    width = None if getattr(out, "isatty", lambda: False)() else 240
    Console(file=out, soft_wrap=True, width=width).print(t)


def emit(rows: Sequence[dict], fmt: str, columns: Sequence[str] | None = None,
         title: str | None = None, meta: dict | None = None) -> None:
    """Print a list of records in ``fmt``. ``meta`` (counts, warnings) wraps the json form and is
    printed above the table; jsonl and csv carry the rows only."""
    rows = list(rows)
    if fmt == "json":
        click.echo(to_json({**meta, "rows": rows} if meta else rows))
    elif fmt == "jsonl":
        for r in rows:
            click.echo(json.dumps({k: _clean(v) for k, v in r.items()}, ensure_ascii=False,
                                  default=_clean))
    elif fmt == "csv":
        cols = list(columns or (rows[0].keys() if rows else []))
        w = csv.DictWriter(sys.stdout, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (json.dumps(v) if isinstance(v, (list, dict)) else _clean(v))
                        for k, v in r.items()})
        sys.stdout.flush()
    else:
        if meta:
            for k, v in meta.items():
                if v not in (None, [], {}):
                    click.echo(f"{k}: {fmt_value(v)}")
        table(rows, columns, title)


def warn(message: str) -> None:
    from ..core.masking import mask

    click.secho(f"warning: {mask(message)}", fg="yellow", err=True)


def info(message: str) -> None:
    from ..core.masking import mask

    click.echo(mask(message), err=True)
