"""pgvector's types on a psycopg connection: numpy arrays sent as binary ``vector`` parameters,
``vector``, ``halfvec``, ``bit`` and ``sparsevec`` values read back. Every connection that sends or
reads vectors (stages, ground truth, query embeddings, warm-up) registers them here."""

from __future__ import annotations

from typing import Any


def register_vector(conn: Any) -> None:
    """Let psycopg send numpy arrays as binary ``vector`` parameters and read pgvector's types
    (idempotent). One catalog query for the four types (pgvector's own ``register_vector``
    makes one round trip per type: 3 ms a connection here). Registered is what the connection's
    own adapters say: its type map knows ``vector``."""
    if conn.adapters.types.get("vector") is not None:
        return
    from pgvector.psycopg.bit import register_bit_info
    from pgvector.psycopg.halfvec import register_halfvec_info
    from pgvector.psycopg.sparsevec import register_sparsevec_info
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    found = {
        name: TypeInfo(name, oid, array_oid, regtype=regtype)
        for name, oid, array_oid, regtype in conn.execute(
            "SELECT n, t.oid, t.typarray, t.oid::regtype::text FROM unnest(%s::text[]) n "
            "JOIN pg_type t ON t.oid = to_regtype(n)",
            (["vector", "bit", "halfvec", "sparsevec"],),
        )
    }
    register_vector_info(conn, found.get("vector"))  # none: pgvector's own error
    register_bit_info(conn, found.get("bit"))
    for name, register in (
        ("halfvec", register_halfvec_info),
        ("sparsevec", register_sparsevec_info),
    ):
        if name in found:
            register(conn, found[name])
