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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from ..core.json_text import json_value, to_json, to_json_line

if TYPE_CHECKING:
    from rich.box import Box

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "json", "jsonl", "csv")
WIDTH = 80  # what a table fits by default when the width is not known
HASH_CHARS = 12
GAP = 2  # between two columns (no padding at the edges)
_HASH = re.compile(r"[0-9a-f]{40,64}")


def format_help(choices: Sequence[str]) -> str:
    """'Output format: table for people; json, csv for scripts.' for exactly ``choices``."""
    people = [c for c in choices if c == "table"]
    scripts = [c for c in choices if c != "table"]
    parts = ([f"{people[0]} for people"] if people else []) + (
        [f"{', '.join(scripts)} for scripts"] if scripts else []
    )
    return "Output format: " + "; ".join(parts) + "."


def set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    """``--wide`` given: tables of this command show every column and full values."""
    if value:
        ctx.meta["pgeval.wide"] = True
    return value


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


def fixed(value: float | None, spec: str = ".4f") -> str:
    """``value`` in ``spec`` (four decimals), a dash when there is none."""
    return "—" if value is None else format(value, spec)


def console_width(out: IO[str]) -> int | None:
    """The width tables are laid out in: the terminal's (at least 80); else $COLUMNS or 80."""
    return None if getattr(out, "isatty", lambda: False)() else (_columns() or WIDTH)


def _columns() -> int | None:
    """$COLUMNS (at least 20); None when it is not a number."""
    try:
        return max(20, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return None


# the width plain text is wrapped at when it is piped and $COLUMNS is not set: None (whole lines,
# for grep), or what `people_width` sets for output that is only ever read (the demo's tour)
_PIPED_WIDTH: ContextVar[int | None] = ContextVar("pgeval_piped_width", default=None)


@contextmanager
def people_width(width: int = WIDTH) -> Iterator[None]:
    """Within it, plain text piped without $COLUMNS is wrapped at ``width`` too."""
    token = _PIPED_WIDTH.set(width)
    try:
        yield
    finally:
        _PIPED_WIDTH.reset(token)


def text_width(out: IO[str] | None = None) -> int | None:
    """The width plain-text lines are wrapped at: the terminal's when ``out`` (stdout) is one,
    else $COLUMNS when it is set; None (no wrapping) otherwise (see :func:`people_width`) and
    with --wide."""
    out = out or sys.stdout
    if is_wide():
        return None
    if getattr(out, "isatty", lambda: False)():
        return shutil.get_terminal_size().columns
    return _columns() or _PIPED_WIDTH.get()


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


def echo_line(text: str, indent: int = 2, err: bool = False) -> None:
    """Print a plain-text line (not a table) for people: wrapped at the console width (see
    :func:`text_width`) with a hanging indent. JSON, JSONL and CSV never go through it."""
    click.echo(wrapped(text, text_width(sys.stderr if err else None), indent), err=err)


def echo_command(line: str, **style: Any) -> None:
    """Print a shell command for people: a line wider than the console is continued at its last
    ``--option`` (or space) that fits, with a backslash, so that it still runs when pasted."""
    from .help_format import split_command

    width = text_width()
    text = line if width is None else "\n".join(split_command(line, width))
    click.secho(text, **style)


# columns whose values are copied into the next command (names, ids, settings) and the columns
# that carry a decision (verdicts): never cut, never broken within a word; they wrap at their
# commas and spaces only, and are never left out. The other text columns are narrowed first
# (cut at a word, with an ellipsis) and, when a key would wrap, left out (--wide shows them).
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
        "design",
        "build",
        "measure",
        "type",
        "category",
        "check",
    }
)
DECISION_COLUMNS = frozenset(
    {"reached", "over_budget", "pareto", "verdict", "status", "passed", "misses", "current"}
)
_BREAK = re.compile(r"(?<=[, ])")  # a key may wrap after a comma or a space, nowhere else
# names made of names (a run: EXPERIMENT.STAGE.REPETITION, a sweep's runs: SWEEP@WHEN.POINT.REP)
# may also wrap after a '.' or an '@' that joins their parts
COMPOUND_COLUMNS = frozenset({"run", "experiment", "sweep"})
_BREAK_COMPOUND = re.compile(r"(?<=[, .@])")


def tokens(text: str, compound: bool = False) -> list[str]:
    """``text`` in the pieces a key cell may wrap between: after each comma and space (and,
    ``compound``, after each ``.`` and ``@``)."""
    return [t for t in (_BREAK_COMPOUND if compound else _BREAK).split(text) if t]


def wrap_key(text: str, width: int, fold: bool = False, compound: bool = False) -> str:
    """``text`` on lines of at most ``width``, broken only after a comma or a space:
    ``m=16,ef_search=40`` -> ``m=16,`` / ``ef_search=40``. A token wider than ``width`` stays
    whole, unless ``fold`` (a name wider than the whole line: folded after a ``.``, ``-`` or
    ``_`` where it can be, all its characters shown in order)."""
    from rich.cells import cell_len

    lines: list[str] = []
    line = ""
    pieces = tokens(text, compound)
    for tok in [p for t in pieces for p in (_fold(t, width) if fold else [t])]:
        if line and cell_len((line + tok).rstrip()) > width:
            lines.append(line.rstrip())
            line = tok.lstrip()
        else:
            line += tok
    lines.append(line.rstrip())
    return "\n".join(lines)


def _fold(token: str, width: int) -> list[str]:
    """``token`` in pieces of at most ``width``, each ending after a ``.``, ``-`` or ``_`` when
    one is in its second half."""
    out = []
    while len(token) > width:
        at = max(token.rfind(c, width // 2, width) for c in ".-_") + 1 or width
        out.append(token[:at])
        token = token[at:]
    return [*out, token]


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` at its last word boundary that fits, with an ellipsis (a word
    is cut only when its first does not fit)."""
    from rich.cells import cell_len

    if cell_len(text) <= width:
        return text
    room = text[: max(width - 1, 0)]
    at = max(room.rfind(" "), room.rfind(",") + 1 if room.rfind(",") >= 0 else -1)
    if at <= 0:
        return room + "…"
    kept = room[:at].rstrip()
    if kept.endswith(",") and cell_len(kept) + 2 <= width:
        return kept + " …"  # a list: the items shown whole, then that more follow
    return kept.rstrip(",") + "…"


def table(
    rows: Iterable[dict],
    columns: Sequence[str] | None = None,
    title: str | None = None,
    file: IO[str] | None = None,
    digits: int = 4,
    wide_only: Sequence[str] = (),
) -> None:
    """Print ``rows`` as a table that fits the console (80 columns when piped). Headers are
    never cut; names, ids, settings (:data:`KEY_COLUMNS`) and verdicts
    (:data:`DECISION_COLUMNS`) are never cut nor broken within a word: they wrap at their commas
    and spaces once the other text columns are as narrow as they go (cut at a word, with an
    ellipsis); before a name wraps, the rightmost other text column is left out (said below the
    table). When even that does not fit, each row is printed as a record (``-[ RECORD 1 ]``,
    one ``column | value`` line each, as psql's expanded display), so nothing that decides is
    lost. ``wide_only`` columns appear with --wide."""
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
    width = None if wide else (console_width(out) or shutil.get_terminal_size().columns)
    widths = None if width is None else fit(columns, cells, numeric, width, _keys(columns))
    every = (columns, cells, numeric)  # a record (or a part) has room for every column
    dropped: list[str] = []
    while width is not None and _wraps_a_name(columns, cells, widths):
        # a name would wrap: leave out the rightmost other text column first (--wide shows it)
        drop = max(
            (i for i in range(1, len(columns)) if _droppable(columns, numeric, i)), default=None
        )
        if drop is None:
            break
        dropped.insert(0, str(columns[drop]))
        columns = columns[:drop] + columns[drop + 1 :]
        cells = [row[:drop] + row[drop + 1 :] for row in cells]
        numeric = numeric[:drop] + numeric[drop + 1 :]
        widths = fit(columns, cells, numeric, width, _keys(columns))
    console = _console(out, width)
    if title:  # wrapped, never cut
        console.print(wrapped(title, width), soft_wrap=True, markup=False, highlight=False)
    if width is not None and widths is None:
        parts = _parts(*every, width)
        if parts is not None and (len(parts) <= 2 or len(rows) > RECORDS_UP_TO):
            _print_parts(console, *every, parts, width)
            return
        records(*every[:2], width, console)
        _note(console, width, "(too wide for a table: one record per row; --wide shows a table)")
        return
    console.print(_rich_table(columns, cells, numeric, widths))
    if dropped:
        _note(
            console,
            width,
            f"(left out to keep names whole: {', '.join(dropped)}; --wide shows every column)",
        )


RECORDS_UP_TO = 5  # a table too wide for one of a few rows: records; of more: parts


def _parts(
    columns: Sequence[str], cells: list[list[str]], numeric: list[bool], width: int
) -> list[list[int]] | None:
    """The table's columns in parts that each fit ``width``, every part led by the names it
    starts with (the first column and the names right after it), the others in their order;
    None when a part with one column beside its names does not fit."""
    keys = _keys(columns)
    lead = [0]
    while len(lead) < len(columns) - 1 and lead[-1] + 1 in keys:
        lead.append(lead[-1] + 1)

    def fits(idx: list[int]) -> bool:
        return _part(columns, cells, numeric, idx, width)[3] is not None

    parts: list[list[int]] = []
    part: list[int] = []
    for i in range(len(lead), len(columns)):
        if fits(lead + part + [i]):
            part.append(i)
        elif part and fits(lead + [i]):
            parts.append(part)
            part = [i]
        else:
            return None
    return [lead + p for p in [*parts, part]]


def _print_parts(
    console: Any,
    columns: Sequence[str],
    cells: list[list[str]],
    numeric: list[bool],
    parts: list[list[int]],
    width: int,
) -> None:
    """The table in ``parts`` (column indexes), one below the other, each led by the names."""
    for n, idx in enumerate(parts):
        if n:
            console.print()
        console.print(_rich_table(*_part(columns, cells, numeric, idx, width)))
    lead = ", ".join(str(columns[i]) for i in parts[0] if all(i in p for p in parts))
    _note(
        console,
        width,
        f"(too wide for one table: {len(parts)} parts, each led by {lead}; --wide shows one table)",
    )


def _part(
    columns: Sequence[str], cells: list[list[str]], numeric: list[bool], idx: list[int], width: int
) -> tuple[list[str], list[list[str]], list[bool], list[int] | None]:
    """The table's columns ``idx``: their names, cells, which hold numbers, and their widths
    within ``width`` (None: they do not fit)."""
    sub = [columns[i] for i in idx]
    sub_cells = [[r[i] for i in idx] for r in cells]
    sub_numeric = [numeric[i] for i in idx]
    return sub, sub_cells, sub_numeric, fit(sub, sub_cells, sub_numeric, width, _keys(sub))


def _keys(columns: Sequence[str]) -> set[int]:
    """The columns never cut: names, settings and verdicts."""
    return {i for i, c in enumerate(columns) if str(c) in KEY_COLUMNS | DECISION_COLUMNS}


def _droppable(columns: Sequence[str], numeric: list[bool], i: int) -> bool:
    """A text column that is neither a name nor a verdict: left out before a name wraps."""
    return not numeric[i] and i not in _keys(columns)


def _wraps_a_name(columns: Sequence[str], cells: list[list[str]], widths: list[int] | None) -> bool:
    """Whether a name or a verdict would wrap at ``widths`` (or the table does not fit)."""
    from rich.cells import cell_len

    if widths is None:
        return True
    return any(cell_len(row[i]) > widths[i] for i in _keys(columns) for row in cells)


def _console(out: IO[str], width: int | None) -> Any:
    from rich.console import Console

    return Console(file=out, soft_wrap=width is None, width=width or 100_000)


def _note(console: Any, width: int | None, text: str) -> None:
    console.print(wrapped(text, width), soft_wrap=True, markup=False, highlight=False)


def _rich_table(
    columns: Sequence[str], cells: list[list[str]], numeric: list[bool], widths: list[int] | None
) -> Any:
    """The rich table, every cell already fitted to its column's width (``widths``; None: as
    it is, with --wide)."""
    from rich.table import Table

    keys = _keys(columns)
    t = Table(
        show_lines=False,
        header_style="bold",
        box=_box(),
        show_edge=False,
        collapse_padding=True,
        pad_edge=False,
    )
    for i, col in enumerate(columns):
        t.add_column(
            col,
            justify="right" if numeric[i] else "left",
            width=None if widths is None else widths[i],
            no_wrap=True,
            overflow="crop",
        )
    for row in cells:
        if widths is None:
            t.add_row(*row)
        else:
            t.add_row(
                *(
                    wrap_key(v, widths[i], compound=str(columns[i]) in COMPOUND_COLUMNS)
                    if i in keys
                    else cut(v, widths[i])
                    for i, v in enumerate(row)
                )
            )
    return t


def records(columns: Sequence[str], cells: list[list[str]], width: int, console: Any) -> None:
    """Each row as a record: ``-[ RECORD n ]---`` then one ``column | value`` line per column,
    values wrapped at their words (never cut) within ``width``."""
    from rich.cells import cell_len

    label = max((cell_len(str(c)) for c in columns), default=0)
    room = max(width - label - 3, 20)
    for n, row in enumerate(cells, 1):
        head = f"-[ RECORD {n} ]"
        console.print(
            head + "-" * max(0, min(width, label + 3 + 20) - len(head)),
            highlight=False,
            markup=False,
        )
        for col, value in zip(columns, row):
            compound = str(col) in COMPOUND_COLUMNS
            lines = wrap_key(value, room, True, compound).split("\n") if value else [""]
            for j, line in enumerate(lines):
                name = str(col) if j == 0 else ""
                console.print(
                    f"{name}{' ' * (label - cell_len(name))} | {line}".rstrip(),
                    soft_wrap=True,
                    highlight=False,
                    markup=False,
                )


def fit(
    columns: Sequence[str],
    cells: list[list[str]],
    numeric: list[bool],
    width: int,
    keys: set[int] | frozenset[int] = frozenset(),
) -> list[int] | None:
    """Column widths for which the table fits ``width``, or None when it cannot: the widest
    other text column is narrowed first, never below its header (nor 8 characters); the
    ``keys`` columns (names, settings, verdicts) only once the others are as narrow as they
    go, and never below their widest word (:func:`tokens`); numbers are never narrowed."""
    from rich.cells import cell_len

    natural = [
        max([cell_len(str(c))] + [cell_len(row[i]) for row in cells]) for i, c in enumerate(columns)
    ]
    floor = [
        natural[i]
        if numeric[i]
        else max(
            [cell_len(str(c))]
            + (
                [
                    cell_len(t.strip())
                    for row in cells
                    for t in tokens(row[i], str(c) in COMPOUND_COLUMNS)
                ]
                if i in keys
                else [min(8, natural[i])]
            )
        )
        for i, c in enumerate(columns)
    ]
    widths = list(natural)
    excess = sum(widths) + GAP * max(len(columns) - 1, 0) - width
    while excess > 0:
        narrowable = [j for j in range(len(columns)) if widths[j] > floor[j]]
        i = max(
            [j for j in narrowable if j not in keys] or narrowable,
            key=lambda j: widths[j],
            default=None,
        )
        if i is None:
            return None
        widths[i] -= 1
        excess -= 1
    return widths


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


def printed_json(fmt: str, doc: Any) -> bool:
    """Print ``doc`` as JSON when ``fmt`` is json; whether it did (then nothing else is shown)."""
    if fmt == "json":
        click.echo(to_json(doc))
    return fmt == "json"


def warn(*messages: str) -> None:
    """Each message as a yellow ``warning: ...`` on stderr (wrapped at words, secrets masked)."""
    from ..core.masking import mask

    for message in messages:
        text = wrapped(f"warning: {mask(message)}", text_width(sys.stderr))
        click.secho(text, fg="yellow", err=True)


def info(message: str) -> None:
    """A line for people on stderr (wrapped at words like :func:`echo_line`)."""
    from ..core.masking import mask

    click.echo(wrapped(mask(message), text_width(sys.stderr)), err=True)
