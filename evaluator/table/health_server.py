"""The server's part of a health check: its PostgreSQL version and known advisories of its
extension versions (`pgeval health`, and a build's warning: tuning/build_sweep.py)."""

from __future__ import annotations

from typing import Any

from . import fingerprint as fpmod
from .finding import Finding

# Known advisories: (extension, first affected, first fixed, id, what).
ADVISORIES = (
    (
        "vector",
        "0.6.0",
        "0.8.2",
        "CVE-2026-3172",
        "a vulnerability in parallel HNSW index builds; upgrade pgvector to 0.8.2, or build HNSW "
        "indexes with max_parallel_maintenance_workers = 0 until then",
    ),
)

MIN_SERVER_VERSION = 14  # the oldest PostgreSQL major version pgeval supports


def version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def advisories(installed: dict[str, str]) -> list[dict]:
    """The advisories that apply to ``installed`` ({extension: version})."""
    found = []
    for ext, first, fixed, ident, what in ADVISORIES:
        version = installed.get(ext)
        if version and version_tuple(first) <= version_tuple(version) < version_tuple(fixed):
            found.append(
                {
                    "extension": ext,
                    "version": version,
                    "id": ident,
                    "fixed_in": fixed,
                    "summary": what,
                }
            )
    return found


def check_server_version(conn: Any) -> Finding:
    """PostgreSQL 14 or newer (13 and older: not supported, untested)."""
    version, num = conn.execute(
        "SELECT current_setting('server_version'), current_setting('server_version_num')::int"
    ).fetchone()
    major = num // 10000
    if major < MIN_SERVER_VERSION:
        return Finding(
            "server_version",
            "error",
            1,
            f"PostgreSQL {version} is older than {MIN_SERVER_VERSION}, the oldest "
            "version pgeval supports: upgrade the server",
        )
    return Finding(
        "server_version",
        "ok",
        0,
        f"PostgreSQL {version} (pgeval supports {MIN_SERVER_VERSION} and newer)",
    )


def check_extensions(conn: Any) -> Finding:
    found = advisories(fpmod.extensions(conn))
    if not found:
        return Finding(
            "vulnerable_extensions",
            "ok",
            0,
            "no known advisory for the installed extension versions",
        )
    return Finding(
        "vulnerable_extensions",
        "warning",
        len(found),
        "; ".join(
            f"{a['extension']} {a['version']} has {a['id']} (fixed in {a['fixed_in']}): {a['summary']}"
            for a in found
        ),
    )
