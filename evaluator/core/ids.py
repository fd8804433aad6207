"""Query and chunk ids: one rule for reading them, one order for comparing them.

- :func:`ident` is the rule for every id pgeval reads — test sets (every format), run files (TREC
  and JSONL), answers files: a non-empty string (an integer is taken as its decimal text) with
  surrounding whitespace removed (Unicode whitespace too: U+00A0, U+3000, ...), no control
  character, at most :data:`MAX_ID_BYTES` bytes in UTF-8. So ``" c1"``, ``"c1\\u00a0"`` and
  ``"c1"`` are the same chunk on both sides of an evaluation.
- Ids compare and sort in byte order (trec_eval's ``strcmp``), whatever the database's collation:
  schema pgeval's id columns are ``COLLATE "C"`` and SQL over ids that come from elsewhere (a
  user's table, a function's result) says so with :func:`as_text`. Python's ``str`` order is code
  point order, which is UTF-8 byte order: plain ``sorted()`` agrees, never a locale-aware sort.
"""

from __future__ import annotations

from psycopg import sql

from .text import CONTROL, clean_str, kind_of, show

BYTE_ORDER = sql.SQL('COLLATE "C"')

# Ids are btree keys (primary keys of pgeval's tables and their indexes); a btree entry cannot
# exceed about 2,700 bytes, and PostgreSQL's own error names no file or line: longer ids are
# refused while parsing, where the message can name the file, the line and the field.
MAX_ID_BYTES = 1024


def id_length_error(value: str, what: str = "id") -> str | None:
    """Why ``value`` is too long to be an id (the reason, for an error message), or None."""
    if len(value) <= MAX_ID_BYTES // 4:  # the common case: no encoding needed
        return None
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= MAX_ID_BYTES:
        return None
    start = "".join(c if c.isprintable() else "?" for c in value[:40])
    return f"{what} is {size:,} bytes long, over the limit of {MAX_ID_BYTES:,} bytes ('{start}...')"


def ident(value: object, what: str = "id") -> str:
    """The id as pgeval stores it, or :class:`ValueError` with the reason (the caller names the
    file, line and field)."""
    if (
        type(value) is str
        and value.isascii()
        and value.isprintable()
        and 0 < len(value) <= 256
        and value == value.strip()
    ):
        return value  # the common case, checked fast
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{what} must be a string, found {kind_of(value)}")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{what} is empty")
    clean_str(text, what)
    bad = CONTROL.search(text)
    if bad:
        raise ValueError(
            f"{what} '{show(text)}' contains a control character ({repr(bad.group())[1:-1]})"
        )
    too_long = id_length_error(text, what)
    if too_long:
        raise ValueError(too_long)
    return text


def as_text(column: sql.Composable) -> sql.Composable:
    """``(column::text COLLATE "C")``: an id of a user's table (text in any collation, an integer,
    a uuid ...) as text that sorts and compares in byte order."""
    return sql.SQL("({}::text {})").format(column, BYTE_ORDER)
