"""Whether the server can run a stage kind: its extension is installed in the knowledge base's
database, at the version the kind needs (``registry.Kind.extension``, ``min_version``). Asked
before a stage or a sweep does any work, so that a server without pgvectorscale, or a pgvector
older than 0.7 (no ``halfvec``, no ``binary_quantize``), gets one line saying what is missing and
how to add it, not an error from deep inside a statement."""

from __future__ import annotations

from typing import Any

from ..core.errors import InputError, param
from ..kinds import registry

# the extension's name in pg_extension -> how a DBA knows it
PRODUCTS = {"vector": "pgvector", "vectorscale": "pgvectorscale"}


def version_tuple(version: str) -> tuple[int, ...]:
    """'0.8.1' -> (0, 8, 1); a suffix after the numbers ('0.7.0-dev') is ignored."""
    import re

    out = []
    for part in version.split("."):
        m = re.match(r"[0-9]+", part)
        if m is None:
            break
        out.append(int(m.group()))
        if m.end() < len(part):  # '0rc1', '0-dev': the numbers end here
            break
    return tuple(out)


def missing(kb: Any, kind_name: str) -> str | None:
    """Why the server cannot run ``kind_name`` (one line), or None when it can."""
    kind = registry.kind(kind_name)
    if kind is None or kind.extension is None:
        return None
    row = kb.execute(
        "SELECT extversion, current_database() FROM pg_extension WHERE extname = %s",
        (kind.extension,),
    ).fetchone()
    product = PRODUCTS.get(kind.extension, kind.extension)
    if row is None:
        database = kb.execute("SELECT current_database()").fetchone()[0]
        return (
            f"stage kind {kind_name} needs {product} (extension {kind.extension}), which is not "
            f"installed in database {database}: CREATE EXTENSION {kind.extension} (as a "
            "superuser or the database owner)"
        )
    have = str(row[0])
    if kind.min_version and version_tuple(have) < version_tuple(kind.min_version):
        return (
            f"stage kind {kind_name} needs {product} {kind.min_version} or newer (its "
            f"{kind.cast_type or ('label' if kind.labels else 'index')} search); database {row[1]} has {have}: "
            f"ALTER EXTENSION {kind.extension} UPDATE after installing a newer {product}"
        )
    return None


def require(kb: Any, kind_name: str, field: str = "stage") -> None:
    """Raise :class:`InputError` when the server cannot run ``kind_name``; leaves no
    transaction open."""
    why = missing(kb, kind_name)
    if kb.info.transaction_status != 0:
        kb.rollback()
    if why is not None:
        raise InputError(why, field=param(field))
