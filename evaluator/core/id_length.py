"""The length limit on query and chunk ids, checked wherever ids are read (test sets, runs).

Ids are btree keys (the primary keys of pgeval.qrel and pgeval.result, and their indexes); a
btree entry cannot exceed about 2,700 bytes, and PostgreSQL's own error names no file or line.
pgeval refuses an id longer than :data:`MAX_ID_BYTES` bytes (UTF-8) while parsing, so that the
message names the file, the line and the field.
"""

from __future__ import annotations

MAX_ID_BYTES = 1024


def id_length_error(value: str, what: str = "id") -> str | None:
    """Why ``value`` is too long to be an id (the reason, for an error message), or None."""
    if len(value) <= MAX_ID_BYTES // 4:  # the common case: no encoding needed
        return None
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= MAX_ID_BYTES:
        return None
    start = "".join(c if c.isprintable() else "?" for c in value[:40])
    return f"{what} is {size:,} bytes long, over the limit of {MAX_ID_BYTES:,} bytes ('{start}...')"
