"""A sweep whose configuration changed since it was measured: what changed, in one line, and
its earlier points kept under another name (:func:`archive`), so that a sweep of one name never
mixes points measured under two configurations."""

from __future__ import annotations

from typing import Any

from ...core.errors import param


def changed_message(name: str, old_fp: dict | None, new_fp: dict | None) -> str:
    """One line: sweep ``name`` was measured under another configuration (what differs)."""
    what = _what(changes(old_fp, new_fp), 3) or "the fingerprint differs"
    return (
        f"sweep '{name}' was measured under another configuration ({what}): its points "
        "would mix two configurations, and none measured under one is kept under another "
        f"(choose another {param('name')}, or {param('fresh', True)} to measure this sweep again)"
    )


def configuration_change(conn: Any, exp_id: int, config_hash: str) -> dict | None:
    """The fingerprint the sweep's experiment was measured under, when its config hash differs
    from ``config_hash`` (else None)."""
    row = conn.execute(
        "SELECT config_hash, fingerprint FROM pgeval.experiment WHERE experiment_id = %s", (exp_id,)
    ).fetchone()
    if row is None or row[0] == config_hash:
        return None
    return row[1] or {}


def changes(old_fp: dict | None, new_fp: dict | None) -> list[dict]:
    """What differs between two fingerprints: [{"key", "then", "now"}]."""
    from ...table.config_diff import compare

    diff = compare(old_fp, new_fp, "then", "now")
    return [{"key": d.key, "then": d.a, "now": d.b} for d in diff.differences]


def _what(found: list[dict], most: int) -> str:
    """``key: then -> now`` of the first ``most`` differences (:func:`changes`), the state of
    indexes and tables (dead tuples, sizes: what autovacuum moves) after what a DBA changed."""
    from ...table.config_diff import show_value

    ordered = sorted(found, key=lambda d: ".state." in d["key"])
    return "; ".join(
        f"{d['key']}: {show_value(d['then'])} -> {show_value(d['now'])}" for d in ordered[:most]
    )


def changed_line(name: str, previous: str, found: list[dict]) -> str:
    """One line: what changed (``found``: :func:`changes`) since sweep ``name`` was measured,
    and where its points are."""
    what = _what(found, 3) + (f"; {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"sweep '{name}': the configuration changed since it was measured "
        f"({what or 'the fingerprint differs'}); measuring again; the earlier points are kept "
        f"as sweep '{previous}' (`pgeval diff {previous} {name}`)"
    )


def archive(conn: Any, sweep_id: int, exp_id: int, name: str) -> str:
    """Rename sweep ``name``, its experiment and its runs to ``NAME@YYYYMMDD-HHMMSS`` (when it
    was created; -2, -3… when taken) so that its points stay, as history, under the
    configuration they were measured in; return the new name."""
    created = conn.execute(
        "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYYMMDD-HH24MISS') FROM pgeval.sweep "
        "WHERE sweep_id = %s",
        (sweep_id,),
    ).fetchone()[0]
    base, new, n = f"{name}@{created}", f"{name}@{created}", 1
    while conn.execute(
        "SELECT 1 FROM pgeval.sweep WHERE name = %s UNION ALL "
        "SELECT 1 FROM pgeval.experiment WHERE name = %s",
        (new, new),
    ).fetchone():
        n += 1
        new = f"{base}-{n}"
    _rename(conn, sweep_id, exp_id, name, new)
    return new


def restore(conn: Any, archived: str, name: str) -> None:
    """Sweep ``archived`` (:func:`archive`'s name) named ``name`` again, its experiment and runs
    too: the sweep that archived it measured nothing (refused, failed, interrupted)."""
    row = conn.execute(
        "SELECT sweep_id, experiment_id FROM pgeval.sweep WHERE name = %s", (archived,)
    ).fetchone()
    if row is not None:
        _rename(conn, row[0], row[1], archived, name)


def _rename(conn: Any, sweep_id: int, exp_id: int, old: str, new: str) -> None:
    conn.execute("UPDATE pgeval.sweep SET name = %s WHERE sweep_id = %s", (new, sweep_id))
    conn.execute("UPDATE pgeval.experiment SET name = %s WHERE experiment_id = %s", (new, exp_id))
    conn.execute(
        "UPDATE pgeval.run SET name = %s || substr(name, %s) "
        "WHERE experiment_id = %s AND left(name, %s) = %s",
        (new, len(old) + 1, exp_id, len(old) + 1, old + "."),
    )
