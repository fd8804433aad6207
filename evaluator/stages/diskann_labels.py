"""``diskann-labels``: pgvectorscale StreamingDiskANN on ``(vector, labels)``, the group filter
searched as its label filter, ``WHERE labels && ARRAY[$n]::smallint[]`` (pgvectorscale's README,
"Filtered Vector Search"). Everything else is the diskann stage's: settings, traps, timing. On
a scratch copy (sweep and advise builds) the label column is derived from the group column
(:mod:`evaluator.table.labels`); on a table it searches the target as it is."""

from __future__ import annotations

from .diskann import DiskannStage


class DiskannLabelsStage(DiskannStage):
    kind = "diskann-labels"
