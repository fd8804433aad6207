"""Word segmentation for text without spaces between words (Chinese, Japanese).

PostgreSQL's text search parsers and pg_textsearch split on spaces and punctuation, so Chinese text
must be segmented *before* it is indexed: keep a pre-segmented text column in the knowledge base
(words separated by single spaces) with a BM25 (or tsvector) index using the ``simple`` text
configuration, and segment every query the same way (``--opt bm25:segmenter=...``). Build the
column with the same function the queries go through, e.g.::

    from evaluator.providers.segmenters import segment
    UPDATE chunks SET content_seg = <segment(content, "jieba")>  -- computed in Python

Segmenters:

- ``none``: the text as it is (the default).
- ``whitespace``: runs of whitespace collapsed to one space.
- ``bigram``: every run of CJK characters becomes its overlapping character bigrams
  (``北京大学`` -> ``北京 京大 大学``; a single character stays itself); other words (Latin
  letters, digits) are kept whole and lower-cased. Needs no dictionary, recalls well, and is what
  pgeval falls back to when jieba is not installed.
- ``jieba``: the jieba package's precise mode (``pip install jieba``); better precision than bigrams
  when the corpus was segmented with jieba too.
"""

from __future__ import annotations

import importlib.util
import re

from ..core.errors import InputError, param

SEGMENTERS = ("none", "whitespace", "bigram", "jieba")

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(f"^[{_CJK}]+$")


def available(name: str) -> bool:
    if name != "jieba":
        return name in SEGMENTERS
    return importlib.util.find_spec("jieba") is not None


def check(name: str | None, field: str = param("options")) -> str:
    """The segmenter's name, validated; InputError when unknown or when jieba is missing."""
    name = (name or "none").strip().lower()
    if name not in SEGMENTERS:
        raise InputError(
            f"unknown segmenter '{name}' (one of {', '.join(SEGMENTERS)})", field=field
        )
    if name == "jieba" and not available("jieba"):
        raise InputError(
            "segmenter 'jieba' needs the jieba package (pip install jieba); 'bigram' needs nothing",
            field=field,
        )
    return name


def bigrams(text: str) -> list[str]:
    out: list[str] = []
    for tok in _TOKEN.findall(text):
        if _IS_CJK.match(tok):
            out.extend([tok] if len(tok) == 1 else [tok[i : i + 2] for i in range(len(tok) - 1)])
        else:
            out.append(tok.lower())
    return out


def segment(text: str | None, name: str = "none") -> str:
    """``text`` segmented by ``name`` into words separated by single spaces."""
    if text is None:
        return ""
    if name == "none":
        return text
    if name == "whitespace":
        return " ".join(text.split())
    if name == "bigram":
        return " ".join(bigrams(text))
    if name == "jieba":
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)
        return " ".join(w.strip() for w in jieba.cut(text) if w.strip())
    raise InputError(
        f"unknown segmenter '{name}' (one of {', '.join(SEGMENTERS)})", field=param("options")
    )
