"""Printing results: `table` for people (rich), `json`, `jsonl`, `csv` for scripts.

Commands build plain data (lists of dicts, dicts) and hand it here; nothing else prints tables.
Tables fit 80 columns by default (a terminal's width when it is wider): numbers at 4
significant digits, hashes cut to 12 characters, headers never cut, the columns a command marks
``wide_only`` left out; ``--wide`` (added by :func:`format_option`) shows every column and value
in full. JSON, JSONL and CSV are never shortened.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from ..core.json_text import json_value, to_json, to_json_line

if TYPE_CHECKING:
    from rich.box import Box

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "json", "jsonl", "csv")
WIDTH = 80  # what a table fits by default when the width is not known
HASH_CHARS = 12
GAP = 3  # between two columns: padding, the (blank) rule, padding
_HASH = re.compile(r"[0-9a-f]{40,64}")


def format_help(choices: Sequence[str]) -> str:
    """'Output format: table for people; json, csv for scripts.' for exactly ``choices``."""
    people = [c for c in choices if c == "table"]
    scripts = [c for c in choices if c != "table"]
    parts = ([f"{people[0]} for people"] if people else []) + (
        [f"{', '.join(scripts)} for scripts"] if scripts else []
    )
    return "Output format: " + "; ".join(parts) + "."


def _set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta["pgeval.wide"] = True
    return value


def wide_option() -> Callable[[F], F]:
    """``--wide``: tables show every column and full values (no 80-column fit)."""
    return click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_set_wide,
        is_eager=True,
        help="Tables: every column, full values and hashes (wider than 80 columns).",
    )


def format_option(default: str = "table", choices: Sequence[str] = FORMATS) -> Callable[[F], F]:
    """``--format`` with exactly ``choices`` in its help, and ``--wide`` when tables are one."""
    fmt = click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help=format_help(choices),
    )
    if "table" not in choices:
        return fmt
    return lambda f: fmt(wide_option()(f))


def is_wide() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().meta.get("pgeval.wide"))


def fmt_number(value: float, digits: int = 4) -> str:
    """``value`` at ``digits`` significant digits, never in exponent form above 1e-4:
    0.43970 -> 0.4397, 20.0 -> 20, 7589.85 -> 7590, 123456.7 -> 123457."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    if value != 0 and abs(value) < 1e-4:
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{digits}g}"
    return text if "e" not in text else f"{value:.0f}"


def fmt_value(value: Any, digits: int = 4, wide: bool = True) -> str:
    """A cell: floats at ``digits`` significant digits; unless ``wide``, hashes at 12
    characters."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return fmt_number(value, digits)
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v, digits, wide) for v in value)
    text = str(value)
    if not wide and _HASH.fullmatch(text):
        return text[:HASH_CHARS]
    return text


def console_width(out: IO[str]) -> int | None:
    """The width tables are laid out in: the terminal's (at least 80); else $COLUMNS or 80."""
    if getattr(out, "isatty", lambda: False)():
        return None
    try:
        return max(20, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return WIDTH


def text_width(out: IO[str] | None = None) -> int | None:
    """The width plain-text lines are wrapped at: the terminal's when ``out`` (stdout) is one,
    else $COLUMNS when it is set; None (no wrapping) otherwise and with --wide."""
    out = out or sys.stdout
    if is_wide():
        return None
    if getattr(out, "isatty", lambda: False)():
        return shutil.get_terminal_size().columns
    try:
        return max(20, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return None


def wrapped(text: str, width: int | None, indent: int = 2) -> str:
    """``text`` wrapped at ``width`` with a hanging indent of ``indent`` columns beyond the
    line's own leading spaces; words are never cut."""
    if width is None or len(text) <= width:
        return text
    lead = len(text) - len(text.lstrip(" "))
    return "\n".join(
        textwrap.wrap(
            text,
            width,
            subsequent_indent=" " * (lead + indent),
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


def echo_line(text: str, indent: int = 2) -> None:
    """Print a plain-text line (not a table) for people: wrapped at the console width (see
    :func:`text_width`) with a hanging indent. JSON, JSONL and CSV never go through it."""
    click.echo(wrapped(text, text_width(), indent))


# columns whose values are copied into the next command (names, ids, settings): never cut with an
# ellipsis; the other text columns are narrowed first, and these wrap within their cell last
KEY_COLUMNS = frozenset(
    {
        "run",
        "name",
        "experiment",
        "sweep",
        "target",
        "testset",
        "label",
        "query_id",
        "stage",
        "group",
        "index",
        "relation",
        "setting",
        "table",
        "worst_group",
    }
)


def table(
    rows: Iterable[dict],
    columns: Sequence[str] | None = None,
    title: str | None = None,
    file: IO[str] | None = None,
    digits: int = 4,
    wide_only: Sequence[str] = (),
) -> None:
    """Print ``rows`` as a table. Headers are never cut; when the table would be wider than the
    console, text cells are cut with an ellipsis, except names and ids (:data:`KEY_COLUMNS`),
    which wrap within their cell once the other columns are as narrow as they go; ``wide_only``
    columns appear with --wide."""
    from rich.console import Console
    from rich.table import Table

    wide = is_wide()
    rows = list(rows)
    columns = [
        c for c in (columns or (rows[0].keys() if rows else [])) if wide or c not in wide_only
    ]
    cells = [[fmt_value(r.get(c), digits, wide) for c in columns] for r in rows]
    numeric = [
        any(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows)
        for c in columns
    ]
    out = file or sys.stdout
    width = 100_000 if wide else console_width(out)
    keys = {i for i, c in enumerate(columns) if str(c) in KEY_COLUMNS}
    limits = {} if width is None else fit(columns, cells, numeric, width, keys)
    dropped: list[str] = []
    while width is not None and keys & set(limits):
        # a name would wrap: leave out the rightmost other text column first (--wide shows it);
        # numbers are never left out (a name wraps within its cell instead)
        drop = max(
            (i for i in range(1, len(columns)) if i not in keys and not numeric[i]), default=None
        )
        if drop is None:
            break
        dropped.insert(0, str(columns[drop]))
        columns = columns[:drop] + columns[drop + 1 :]
        cells = [row[:drop] + row[drop + 1 :] for row in cells]
        numeric = numeric[:drop] + numeric[drop + 1 :]
        keys = {i for i, c in enumerate(columns) if str(c) in KEY_COLUMNS}
        limits = fit(columns, cells, numeric, width, keys)
    # the title on a line of its own: a table's own title is cut to the table's width
    t = Table(show_lines=False, header_style="bold", box=_box(), show_edge=False)
    for i, col in enumerate(columns):
        t.add_column(
            col,
            justify="right" if numeric[i] else "left",
            min_width=len(str(col)),
            max_width=limits.get(i),
            no_wrap=not wide and i not in keys,
            overflow="fold" if wide or i in keys else "ellipsis",
        )
    for row in cells:
        t.add_row(*row)
    console = Console(file=out, soft_wrap=wide, width=width)
    if title:  # wrapped, never cut
        title = wrapped(title, None if wide else width or shutil.get_terminal_size().columns)
        console.print(title, soft_wrap=True, markup=False, highlight=False)
    console.print(t)
    if dropped:
        note = f"(left out to keep names whole: {', '.join(dropped)}; --wide shows every column)"
        console.print(
            wrapped(note, None if wide else width or shutil.get_terminal_size().columns),
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


def fit(
    columns: Sequence[str],
    cells: list[list[str]],
    numeric: list[bool],
    width: int,
    keys: set[int] | frozenset[int] = frozenset(),
) -> dict[int, int]:
    """Widths for the text columns so that the table fits ``width``: the widest text column is
    narrowed first, never below its header (nor 8 characters), the ``keys`` columns (which wrap
    rather than cut) only once the others are as narrow as they go; numbers are never
    narrowed."""
    from rich.cells import cell_len

    natural = [
        max([cell_len(str(c))] + [cell_len(row[i]) for row in cells]) for i, c in enumerate(columns)
    ]
    floor = [max(cell_len(str(c)), min(8, natural[i])) for i, c in enumerate(columns)]
    widths = list(natural)
    excess = sum(widths) + GAP * max(len(columns) - 1, 0) + 2 - width  # + the edge padding
    limits = {}
    while excess > 0:
        narrowable = [j for j in range(len(columns)) if not numeric[j] and widths[j] > floor[j]]
        i = max(
            [j for j in narrowable if j not in keys] or narrowable,
            key=lambda j: widths[j],
            default=None,
        )
        if i is None:
            break
        widths[i] -= 1
        limits[i] = widths[i]
        excess -= 1
    return limits


def _box() -> Box:
    from rich import box

    return box.SIMPLE_HEAD


def emit(
    rows: Sequence[dict],
    fmt: str,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    meta: dict | None = None,
    wide_only: Sequence[str] = (),
) -> None:
    """Print a list of records in ``fmt``. ``meta`` (counts, warnings) wraps the json form and is
    printed above the table; jsonl and csv carry the rows only. ``wide_only``: table columns
    shown only with --wide."""
    rows = list(rows)
    if fmt == "json":
        click.echo(to_json({**meta, "rows": rows} if meta else rows))
    elif fmt == "jsonl":
        for r in rows:
            click.echo(to_json_line(r))
    elif fmt == "csv":
        cols = list(columns or (rows[0].keys() if rows else []))
        w = csv.DictWriter(sys.stdout, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    k: (json.dumps(v) if isinstance(v, (list, dict)) else json_value(v))
                    for k, v in r.items()
                }
            )
        sys.stdout.flush()
    else:
        if meta:
            for k, v in meta.items():
                if v not in (None, [], {}):
                    click.echo(f"{k}: {fmt_value(v, wide=is_wide())}")
        table(rows, columns, title, wide_only=wide_only)


def warn(message: str) -> None:
    from ..core.masking import mask

    click.secho(f"warning: {mask(message)}", fg="yellow", err=True)


def info(message: str) -> None:
    from ..core.masking import mask

    click.echo(mask(message), err=True)
