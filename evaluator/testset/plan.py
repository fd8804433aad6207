"""What a load reads: the format (given or guessed from the name), its source files, and the
field names its error messages use."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import InputError, param
from .formats import FORMATS
from .source import Source, format_suffix

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .grademap import GradeMap
    from .records import Row

_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".qrels": "trec",
    ".qrel": "trec",
    ".trec": "trec",
}


@dataclass
class Plan:
    fmt: str
    sources: list[Source]  # index = Row.file; [0] is the FILE argument
    labels: dict = field(default_factory=dict)
    # TREC without --queries: the queries are the ids the judgements name (no text)
    queries_from_judgements: bool = False
    # TREC with --queries, BEIR: queries no judgement names are skipped (and counted)
    judged_only: bool = False

    @property
    def files(self) -> list[str]:
        return [s.label for s in self.sources]

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sources)

    def parse(self, grade_map: GradeMap) -> Iterator[Row]:
        module = importlib.import_module(f"{__package__}.formats.{self.fmt}")
        return module.parse(self, grade_map)


def guess_format(path: Path) -> str:
    if path.is_dir():
        return "beir"
    suffix = format_suffix(path)
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if "qrel" in path.name.lower():
        return "trec"
    raise InputError(
        f"cannot tell the format from the file name; pass {param('format')} ({'|'.join(FORMATS)})",
        file=str(path),
    )


def make_plan(path: str | Path, fmt: str | None = None, queries: str | Path | None = None) -> Plan:
    path = Path(path)
    if fmt is None:
        if not path.exists():
            raise InputError("no such file", file=str(path))
        fmt = guess_format(path)
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise InputError(
            f"unknown format '{fmt}' (use {', '.join(FORMATS)})", field=param("format")
        )
    if queries is not None and fmt != "trec":
        raise InputError(
            f"{param('queries')} applies to TREC qrels only, not to {fmt}", field=param("queries")
        )
    if fmt == "beir":
        if not path.is_dir():
            raise InputError(
                "a BEIR test set is a folder holding queries.jsonl and qrels/test.tsv",
                file=str(path),
            )
        qrels, qfile = path / "qrels" / "test.tsv", path / "queries.jsonl"
        for p in (qfile, qrels):
            if not p.is_file():
                raise InputError(f"the BEIR folder has no {p.relative_to(path)}", file=str(path))
        return Plan(
            fmt,
            [Source(qrels), Source(qfile)],
            {"query": "_id", "qrel": "query-id", "chunk": "corpus-id", "known_queries": str(qfile)},
            judged_only=True,
        )
    if fmt == "trec":
        sources = [Source(path)] + ([Source(queries)] if queries is not None else [])
        labels = {"query": "query-id", "qrel": "query-id", "chunk": "chunk-id"}
        if queries is not None:
            labels["known_queries"] = str(queries)
        return Plan(
            fmt,
            sources,
            labels,
            queries_from_judgements=queries is None,
            judged_only=queries is not None,
        )
    return Plan(fmt, [Source(path)], {"query": "id", "qrel": "id", "chunk": "relevant"})
