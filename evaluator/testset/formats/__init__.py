"""One parser per test set format. Each exposes ``parse(plan, grade_map) -> Iterator[Row]`` and
streams its file(s) line by line; see :mod:`evaluator.testset.records` for the rows."""

FORMATS = ("jsonl", "csv", "trec", "beir")
