"""Cells of a CSV file meant for a spreadsheet, safe from formula injection and read back as
written. A spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab or a
carriage return before one) as a formula; :func:`cell` prefixes such a cell with an apostrophe,
which spreadsheets show as text (OWASP's advice), and prefixes a cell that starts with an
apostrophe too, so that :func:`value` (one leading apostrophe dropped) gives back exactly what
was written: an id ``-12`` goes out as ``'-12`` and comes back as ``-12``."""

from __future__ import annotations

TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "'")


def cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows and never evaluates."""
    return "'" + text if text.startswith(TRIGGERS) else text


def value(text: str) -> str:
    """A cell :func:`cell` wrote (or a person typed) as its text: one leading apostrophe
    dropped."""
    return text[1:] if text.startswith("'") else text
