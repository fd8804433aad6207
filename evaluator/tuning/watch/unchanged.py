"""What a probe takes from its series' last probe when the table is unchanged.

The data is measured first, once (:func:`evaluator.table.data_checksum.measure`: on an unchanged
table a cheap version scan and the cached content checksum), and handed to the probe's sweep,
which would otherwise measure it again. A sampled query set is the first ``count`` chunks in the
order of ``hashtextextended(chunk id, seed)``, their vectors: a function of the rows under the
target's filters, of ``count`` and of ``seed``. When the rows and the content checksum are those
the series' last probe recorded (``pgeval.probe.table_rows``, ``data_checksum``), with the same
query source, that probe's query set is the one sampling would draw again: it is reused as
stored (name and source record), and the sampling scan is skipped. Anything else (another
checksum, no checksum, queries from SQL or a file, the query set gone) samples as before.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...table.data_checksum import ChecksumCache, DataChecksum, measure

if TYPE_CHECKING:
    from ...core.db import Database


def data(database: Database, target: Any) -> DataChecksum:
    """The data part of the fingerprint of ``target`` (scoped to the probe's group)."""
    with database.connect() as results, database.connect(results=False, read_only=True) as kb:
        out = measure(kb, target, checksum=True, cache=ChecksumCache(results, database))
        kb.rollback()
    return out


def read_via(measured: DataChecksum) -> str:
    """How the data version was read: ``change log`` (its count, no scan; `pgeval target
    track`), ``row versions`` (a pass over the table's row versions, the checksum cached) or
    ``checksum`` (the content checksum computed: a new version)."""
    if measured.scans == 0:
        return "change log"
    return "row versions" if measured.source == "reused" else "checksum"


def query_set(
    database: Database, *, series: str, source: dict, target: Any, measured: DataChecksum
) -> tuple[str, dict] | None:
    """(name, source record) of the last probe's query set when sampling would draw it again."""
    checksum = measured.data.get("checksum")
    if source.get("kind") != "sample" or checksum is None:
        return None
    with database.connect() as results:
        row = results.execute(
            "SELECT t.name, t.content_hash, t.n_queries FROM pgeval.probe p "
            "JOIN pgeval.testset t ON t.name = p.testset "
            "WHERE p.sweep = %s AND p.table_rows = %s AND p.data_checksum = %s "
            "AND p.query_source = %s::jsonb ORDER BY p.probe_id DESC LIMIT 1",
            (series, measured.data["rows"], checksum, json.dumps(source)),
        ).fetchone()
        results.rollback()
    if row is None:
        return None
    from ...testset.query_source import sample_record

    name, digest, count = row
    return name, sample_record(count, digest, source.get("seed"), target.name)
