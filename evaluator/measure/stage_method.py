"""How a stage ranked, named wherever its figures are shown.

A keyword stage (kind ``bm25``) ranks with pg_textsearch's BM25 where the text column has a BM25
index, else with PostgreSQL full-text search (``ts_rank_cd``: no IDF, no length saturation —
not BM25). Its run's parameters say which (``method``: ``pg_textsearch`` | ``fts``); every
report that shows the stage's figures labels a fallback stage ``bm25 (ts_rank_cd fallback)``
and carries the note.
"""

from __future__ import annotations

FTS_LABEL = "ts_rank_cd fallback"
FTS_NOTE = (
    "ranked by PostgreSQL full-text search (ts_rank_cd), not BM25: pg_textsearch or its "
    "bm25 index is missing"
)


def method_label(kind: str | None, params: dict | None) -> str | None:
    """'ts_rank_cd fallback' for a keyword stage that did not rank with BM25, else None."""
    if kind == "bm25" and (params or {}).get("method") == "fts":
        return FTS_LABEL
    return None


def label(name: str | None, kind: str | None, params: dict | None) -> str | None:
    """``name`` with its method when the kind's name would mislead: 'bm25 (ts_rank_cd fallback)'."""
    extra = method_label(kind, params)
    return f"{name} ({extra})" if extra and name is not None else name


def note(name: str | None, kind: str | None, params: dict | None) -> str | None:
    """One sentence for the warnings of a report, or None."""
    if method_label(kind, params) is None:
        return None
    return f"stage {name}: {(params or {}).get('note') or FTS_NOTE}"
