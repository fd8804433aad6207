"""The Cranfield 1400 collection in SMART format (docs/datasets.md; a gzipped copy ships in
evaluator/demo/data/cranfield).

Queries are numbered 1..225 by their position in cran.qry (the file's .I numbers are not the ids
the judgements use). Relevance codes 1-4 (and -1) are Cleverdon's; map them onto pgeval's 0-3 with
an explicit grade map, e.g. :data:`GRADE_MAP`.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

GRADE_MAP = {"1": 3, "2": 2, "3": 1, "4": 0, "-1": 0}
GRADE_MAP_SPEC = "1=3,2=2,3=1,4=0,-1=0"


def read_text(path: Path) -> str:
    """The text of ``path``, or of ``path.gz`` (the packaged copy) where ``path`` is absent."""
    path = Path(path)
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        return gzip.decompress(path.with_name(path.name + ".gz").read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8", errors="strict")


def _records(path: Path) -> list[dict[str, str]]:
    text = read_text(path).replace("\r\n", "\n")
    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    field: str | None = None
    for line in text.split("\n"):
        m = re.match(r"^\.([ITABW])\s*(.*)$", line)
        if m:
            tag, rest = m.groups()
            if tag == "I":
                current = {"I": rest.strip()}
                records.append(current)
                field = None
            else:
                field = tag
                assert current is not None, "the packaged file starts with .I"
                current[field] = rest.strip()
            continue
        if current is not None and field is not None:
            current[field] = (current[field] + " " + line.strip()).strip()
    return records


def queries(folder: Path) -> list[tuple[str, str]]:
    """[(query_id, text)] with ids "1".."225" by position."""
    return [
        (str(i), " ".join(r.get("W", "").split()))
        for i, r in enumerate(_records(Path(folder) / "cran.qry"), 1)
    ]


def documents(folder: Path) -> list[tuple[str, str, str]]:
    """[(doc_id, title, text)]; text is .W, or the title where .W is empty."""
    out = []
    for r in _records(Path(folder) / "cran.all.1400"):
        title = " ".join(r.get("T", "").split())
        body = " ".join(r.get("W", "").split()) or title
        out.append((r["I"], title, body))
    return out


def qrels(folder: Path) -> list[tuple[str, str, str]]:
    """[(query_id, doc_id, code)] as in cranqrel (codes as strings: "1".."4", "-1")."""
    out = []
    for line in read_text(Path(folder) / "cranqrel").splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[0], parts[1], parts[2]))
    return out
