"""Test sets: load (JSONL, CSV, TREC qrels, BEIR folders), validate, store, list, show, delete.

from evaluator.testset import load, list_testsets, show_testset, resolve_testset
report = load(conn, "cases.jsonl", "kb-v1")                 # -> LoadReport
report = load(conn, "cran.qrels", "cran", fmt="trec", queries="cran.tsv",
              grade_map="1=3,2=2,3=1,4=0,-1=0")
testset_id, content_hash = resolve_testset(conn, "kb-v1")  # NotFound when absent

The readers and the store load when first read (``__getattr__``): `pgeval testset list` needs
only the catalog.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .catalog import delete_testset, list_testsets, resolve_testset, show_testset

if TYPE_CHECKING:
    from .formats import FORMATS
    from .grademap import GradeMap
    from .plan import guess_format
    from .store import LoadReport, load

_LAZY = {
    "FORMATS": "formats",
    "GradeMap": "grademap",
    "guess_format": "plan",
    "LoadReport": "store",
    "load": "store",
}

__all__ = [
    "load",
    "LoadReport",
    "list_testsets",
    "show_testset",
    "resolve_testset",
    "delete_testset",
    "GradeMap",
    "FORMATS",
    "guess_format",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
