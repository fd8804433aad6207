"""Test sets: load (JSONL, CSV, TREC qrels, BEIR folders), validate, store, list, show, delete.

from evaluator.testset import load, list_testsets, show_testset, resolve_testset
report = load(conn, "cases.jsonl", "kb-v1")                 # -> LoadReport
report = load(conn, "cran.qrels", "cran", fmt="trec", queries="cran.tsv",
              grade_map="1=3,2=2,3=1,4=0,-1=0")
testset_id, content_hash = resolve_testset(conn, "kb-v1")  # NotFound when absent
"""

from .catalog import delete_testset, list_testsets, resolve_testset, show_testset
from .formats import FORMATS
from .grademap import GradeMap
from .plan import guess_format
from .store import LoadReport, load

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
