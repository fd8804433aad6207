"""Query-time settings (``--set GUC=VALUE``, or ``--set STAGE:GUC=VALUE`` for one stage of
the pipeline alone: :func:`parse` is the one parser, :func:`scope` a stage's set): validated
against ``pg_settings`` (name, context, type, range, enum values) and applied with ``set_config(name, value, true)`` — the function form
of ``SET LOCAL`` with the name and the value as bound parameters, so nothing is interpolated.

pgvector's and pgvectorscale's settings (``hnsw.*``, ``ivfflat.*``, ``diskann.*``) appear in
``pg_settings`` only once their library is loaded in the session; :func:`load_libraries` loads
them by calling one of each extension's functions (no superuser ``LOAD`` needed).
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import InputError, first_line, param

_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
_UNIT = re.compile(r"^\s*(-?\d+)\s*([a-zA-Z]+)?\s*$")
_BOOL = {"on", "off", "true", "false", "yes", "no", "1", "0", "t", "f", "y", "n"}
SETTABLE = ("user", "superuser")
# settings of pgeval's own, not the server's: name -> (min, max). bq.candidates: how many
# Hamming-nearest candidates the hnsw-bq stage re-ranks by the full vector
OWN = {"bq.candidates": (1, 1_000_000)}
# settings a stage must never take from the user: they would lift the READ ONLY transaction the
# knowledge base is read in, or change who reads it (least privilege; issue 5)
GUARDED = {
    name: "the knowledge base is always read in a READ ONLY transaction"
    for name in (
        "transaction_read_only",
        "default_transaction_read_only",
        "transaction_isolation",
        "default_transaction_isolation",
        "transaction_deferrable",
        "default_transaction_deferrable",
    )
}
GUARDED.update(
    role="pgeval reads as the user it connects as",
    session_authorization="pgeval reads as the user it connects as",
    statement_timeout=f"use {param('statement_timeout')} (recorded with every run)",
)

# the one default of --statement-timeout (pipeline, sweep): every statement on the knowledge base
DEFAULT_STATEMENT_TIMEOUT = "5min"


def parse(items: Any, stages: Any = None) -> dict[str, str]:
    """('hnsw.ef_search=100', 'hnsw:enable_sort=off', ...) -> {'hnsw.ef_search': '100',
    'hnsw:enable_sort': 'off'}; setting names lower-cased.

    ``STAGE:GUC=VALUE`` scopes a setting to one stage of the pipeline (its key is
    ``STAGE:guc``); a plain ``GUC=VALUE`` applies to every stage. ``stages``: the stage names
    a scoped setting may name (None: not checked here; ``()``: scoped settings refused)."""
    out: dict[str, str] = {}
    for item in items or ():
        head, sep, value = str(item).partition("=")
        stage, colon, name = head.rpartition(":")
        stage, name = stage.strip(), name.strip().lower()
        if not sep or not name or (colon and not stage):
            raise InputError(
                f"'{item}' is not GUC=VALUE or STAGE:GUC=VALUE (e.g. "
                "hnsw.ef_search=100, hnsw:enable_sort=off)",
                field=param("settings"),
            )
        if not _NAME.match(name):
            raise InputError(f"'{name}' is not a setting name", field=param("settings"))
        if colon and stages is not None and stage not in stages:
            known = ", ".join(stages) if stages else "none here: give GUC=VALUE"
            raise InputError(
                f"setting '{item}' names stage '{stage}', which is not a stage "
                f"of this run (stages: {known})",
                field=param("settings"),
            )
        key = f"{stage}:{name}" if colon else name
        if key in out:
            raise InputError(f"setting '{key}' is given twice", field=param("settings"))
        if name in GUARDED:
            raise InputError(
                f"setting '{name}' cannot be changed: {GUARDED[name]}", field=param("settings")
            )
        out[key] = value.strip()
    return out


def is_scoped(key: str) -> bool:
    return ":" in key


def unscoped(settings: dict[str, str] | None) -> dict[str, str]:
    """The settings every stage applies."""
    return {k: v for k, v in (settings or {}).items() if not is_scoped(k)}


def scoped_stages(settings: dict[str, str]) -> list[str]:
    """The stages named by scoped settings, in order of first appearance."""
    out: list[str] = []
    for k in settings or {}:
        if is_scoped(k) and k.split(":", 1)[0] not in out:
            out.append(k.split(":", 1)[0])
    return out


def scope(settings: dict[str, str], stage: str | None) -> dict[str, str]:
    """The settings stage ``stage`` applies: the unscoped ones, overlaid by those scoped to it;
    settings scoped to other stages are left out."""
    out = unscoped(settings)
    for key, value in (settings or {}).items():
        if is_scoped(key) and stage is not None and key.split(":", 1)[0] == stage:
            out[key.split(":", 1)[1]] = value
    return out


def check_stages(settings: dict[str, str], stage_names: Any) -> None:
    """Every scoped setting names a stage in ``stage_names`` (InputError naming --set)."""
    for key in settings or {}:
        if is_scoped(key) and key.split(":", 1)[0] not in stage_names:
            raise InputError(
                f"setting '{key}' names stage '{key.split(':', 1)[0]}', which is "
                f"not in {param('stages')} ({', '.join(stage_names)})",
                field=param("settings"),
            )


# pgvector's library loaded by its type's input function, and pgvectorscale's (where installed)
# by one of its functions, found through the extension's objects: one statement, one round trip
_LOAD = """
DO $pgeval$
DECLARE s text;
BEGIN
  {body}
END $pgeval$
"""
_LOAD_BODY = """PERFORM '[1]'::vector;
  SELECT n.nspname INTO s FROM pg_extension e JOIN pg_depend d ON d.refobjid = e.oid
    JOIN pg_proc p ON p.oid = d.objid JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE e.extname = 'vectorscale' AND p.proname = 'distance_type_cosine' LIMIT 1;
  IF s IS NOT NULL THEN
    EXECUTE format('SELECT %I.distance_type_cosine()', s);
  END IF;"""
LOAD_LIBRARIES = _LOAD.format(body=_LOAD_BODY)
# the same, an error (no pgvector here) swallowed in the block: nothing to roll back after it
LOAD_LIBRARIES_IF_ANY = _LOAD.format(
    body="BEGIN\n  " + _LOAD_BODY + "\n  EXCEPTION WHEN OTHERS THEN NULL;\n  END;"
)


def load_libraries(conn: Any) -> None:
    """Load pgvector's and pgvectorscale's libraries so that their GUCs are defined (an error
    when pgvector is not installed). A library stays loaded in its server session, but behind
    a transaction pooler the next transaction may run on another server session: call this in
    the transaction that reads the settings."""
    conn.execute(LOAD_LIBRARIES)


def _check_value(
    name: str, value: str, vartype: str, unit: Any, lo: Any, hi: Any, enumvals: Any
) -> None:
    bad = f"setting {name}={value!r}"
    if vartype == "bool":
        if value.lower() not in _BOOL:
            raise InputError(f"{bad}: expected on or off", field=param("settings"))
    elif vartype == "integer":
        m = _UNIT.match(value)
        if not m or (m.group(2) and not unit):
            raise InputError(
                f"{bad}: expected an integer" + (f" (unit {unit})" if unit else ""),
                field=param("settings"),
            )
        if not m.group(2) and lo is not None and not (float(lo) <= int(m.group(1)) <= float(hi)):
            raise InputError(f"{bad}: out of range {lo}..{hi}", field=param("settings"))
    elif vartype == "real":
        try:
            v = float(value)
        except ValueError:
            raise InputError(f"{bad}: expected a number", field=param("settings")) from None
        if lo is not None and not (float(lo) <= v <= float(hi)):
            raise InputError(f"{bad}: out of range {lo}..{hi}", field=param("settings"))
    elif vartype == "enum":
        if value.lower() not in [e.lower() for e in enumvals or []]:
            raise InputError(
                f"{bad}: expected one of {', '.join(enumvals or [])}", field=param("settings")
            )


def validate(conn: Any, settings: dict[str, str]) -> dict[str, str]:
    """Check every setting against pg_settings; then let the server parse them all (applied with
    set_config inside a transaction that is rolled back). Returns ``settings`` unchanged."""
    if not settings:
        return settings
    if any(is_scoped(k) for k in settings):  # each stage's set, as that stage applies it
        for stage in [None, *scoped_stages(settings)]:
            validate(conn, scope(settings, stage))
        return settings
    # one transaction: the libraries loaded and pg_settings read on the same server session
    with conn.transaction(force_rollback=True):
        _validate(conn, settings)
    return settings


def _validate(conn: Any, settings: dict[str, str]) -> None:
    try:
        with conn.transaction():
            load_libraries(conn)
    except Exception:  # no pgvector: its settings are reported unknown below
        pass
    rows = conn.execute(
        "SELECT name, vartype, unit, min_val, max_val, enumvals, context FROM pg_settings "
        "WHERE name = ANY(%s)",
        (list(settings),),
    ).fetchall()
    known = {r[0]: r for r in rows}
    # pgeval's own settings (no server has them): applied as placeholders by set_config, read
    # by the stage that owns them, recorded and hashed like any setting
    for name, (lo, hi) in OWN.items():
        if name in settings:
            known[name] = (name, "integer", None, str(lo), str(hi), None, "user")
    for name, value in settings.items():
        if name in GUARDED and name != "statement_timeout":
            raise InputError(
                f"setting '{name}' cannot be changed: {GUARDED[name]}", field=param("settings")
            )
        if name not in known:
            hint = _unknown_hint(conn, name)
            raise InputError(f"unknown setting '{name}'{hint}", field=param("settings"))
        _, vartype, unit, lo, hi, enumvals, context = known[name]
        if context not in SETTABLE:
            raise InputError(
                f"setting '{name}' cannot be changed per transaction (context {context})",
                field=param("settings"),
            )
        _check_value(name, value, vartype, unit, lo, hi, enumvals)
    try:
        with conn.transaction(force_rollback=True):
            apply_local(conn, settings)
    except InputError:
        raise
    except Exception as exc:
        first = first_line(exc)
        raise InputError(
            f"the server refused the settings: {first}", field=param("settings")
        ) from None


def _unknown_hint(conn: Any, name: str) -> str:
    """What the message about the unknown setting ``name`` adds: the known settings of its
    prefix, or the settings it may have meant without one."""

    def like(pattern: str) -> list[str]:
        rows = conn.execute(
            "SELECT name FROM pg_settings WHERE name LIKE %s ORDER BY name", (pattern,)
        ).fetchall()
        return [r[0] for r in rows]

    if "." in name:
        prefix = name.split(".")[0] + "."
        similar = like(prefix.replace("_", r"\_") + "%")
        if similar:
            return f" (known {prefix}* settings: {', '.join(similar)})"
        return f" (no {prefix}* settings on this server: is the extension installed?)"
    # ef_search for hnsw.ef_search: an extension's setting without its prefix
    meant = like("%." + name.replace("_", r"\_")) + [own for own in OWN if own.endswith("." + name)]
    return f" (did you mean {' or '.join(meant)}?)" if meant else ""


def with_statement_timeout(
    conn: Any, settings: dict[str, str], timeout: str | None, *, check: bool = True
) -> dict[str, str]:
    """``settings`` plus ``statement_timeout`` (``--statement-timeout``: every statement on the
    knowledge base is cancelled past it; applied by SET LOCAL like any setting, so recorded in
    every run's params). None leaves the server's setting alone. ``check=False``: not validated
    on the server (the caller's settings were, under the same fingerprint)."""
    if timeout is None:
        return settings
    try:
        if check:
            validate(conn, {"statement_timeout": str(timeout).strip()})
    except InputError as exc:
        raise InputError(exc.detail, field=param("statement_timeout")) from None
    return {**settings, "statement_timeout": str(timeout).strip()}


def apply_local(conn: Any, settings: dict[str, str]) -> dict[str, str]:
    """``SET LOCAL`` each setting (inside the current transaction); return the effective values
    as the server shows them (``current_setting``)."""
    if not settings:
        return {}
    # one round trip: applied in the mapping's order (the rows of unnest, in order)
    names = list(settings)
    rows = conn.execute(
        "SELECT set_config(s.n, s.v, true) FROM unnest(%s::text[], %s::text[]) "
        "WITH ORDINALITY AS s(n, v, i) ORDER BY s.i",
        (names, [str(settings[n]) for n in names]),
    ).fetchall()
    return {name: row[0] for name, row in zip(names, rows)}


def current(conn: Any, names: Any) -> dict[str, str | None]:
    """Current values (None when the setting does not exist on this server)."""
    names = list(names)
    if not names:
        return {}
    rows = conn.execute(
        "SELECT current_setting(s.n, true) FROM unnest(%s::text[]) WITH ORDINALITY AS s(n, i) "
        "ORDER BY s.i",
        (names,),
    ).fetchall()
    return {name: row[0] for name, row in zip(names, rows)}


def settings_items(settings: dict | None) -> list[str]:
    """``{"hnsw.ef_search": 40}`` or ``["hnsw.ef_search=40"]`` -> ``["hnsw.ef_search=40"]``: a
    mapping goes through the one ``--set`` parser (:func:`parse`) too."""
    if settings is None:
        return []
    if isinstance(settings, dict):
        return [f"{k}={v}" for k, v in settings.items()]
    if isinstance(settings, str):
        return [settings]
    return list(settings)
