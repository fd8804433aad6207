"""What differs between two configuration fingerprints (`pgeval diff RUN_A RUN_B`).

A fingerprint is flattened to dotted keys (``query_settings.hnsw.ef_search``,
``indexes.docs_hnsw.options.m``); keys that belong to one variable are grouped (``data.rows`` and
``data.checksum`` are one change of content; ``server.version`` and ``server.version_num`` one
upgrade; an index that appears or disappears is one change). The ``info`` part (capture time,
sizes, names, the full configuration) is never compared: a fingerprint holds only what can
change a retrieval number (:mod:`evaluator.table.fingerprint`). An index's ``build`` (OID and file
node) is its own variable when only the build differs (REINDEX); rebuilt with other options, the
options name the change. Its ``state`` (pages, the table's dead tuples) is its own variable when
only the state differs (a VACUUM); a new build implies it. More than one variable changed means the two runs cannot attribute a
difference in their numbers to a single cause: the caller warns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import NotFound

# top-level sections whose keys all form one variable
GROUPED = ("server", "data", "testset")


def flatten(value: Any, prefix: str = "", keep_empty: bool = True) -> dict[str, object]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values (compared whole). An empty dict is a
    value of its own with ``keep_empty`` (display), else nothing (comparison: ``{}`` against
    ``{"labels": ...}`` is one added key)."""
    out: dict[str, object] = {}
    if isinstance(value, dict):
        if not value and prefix and keep_empty:
            out[prefix] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}.{k}" if prefix else str(k), keep_empty))
    else:
        out[prefix] = value
    return out


def variable_of(key: str, a_keys: set[str], b_keys: set[str]) -> str:
    """The variable a flattened key belongs to."""
    parts = key.split(".")
    if parts[0] in GROUPED:
        return parts[0]
    if parts[0] == "indexes" and len(parts) > 1:
        index = f"indexes.{parts[1]}"
        in_a = any(k.startswith(index + ".") for k in a_keys)
        in_b = any(k.startswith(index + ".") for k in b_keys)
        if not (in_a and in_b):
            return index  # the index exists on one side only: one change
        if len(parts) > 3 and parts[2] == "options":
            return ".".join(parts[:4])  # each option is its own variable
        return ".".join(parts[:3])  # build (oid and file node): one variable
    return key


@dataclass
class Difference:
    key: str
    a: object
    b: object
    variable: str


@dataclass
class Diff:
    a: str
    b: str
    hash_a: str | None
    hash_b: str | None
    differences: list[Difference] = field(default_factory=list)

    @property
    def variables(self) -> list[str]:
        return sorted({d.variable for d in self.differences})

    def warnings(self) -> list[str]:
        out = []
        if self.hash_a is None or self.hash_b is None:
            missing = [n for n, h in ((self.a, self.hash_a), (self.b, self.hash_b)) if h is None]
            out.append(f"no fingerprint recorded for {', '.join(missing)}: nothing to compare")
        elif len(self.variables) > 1:
            out.append(
                f"{len(self.variables)} variables differ ({', '.join(self.variables)}): "
                "a change in the numbers cannot be attributed to one of them"
            )
        return out

    def rows(self) -> list[dict]:
        return [
            {"key": d.key, "a": show_value(d.a), "b": show_value(d.b), "variable": d.variable}
            for d in self.differences
        ]

    def as_dict(self) -> dict:
        """What `pgeval diff --format json` prints."""
        return {
            "a": self.a,
            "b": self.b,
            "config_hash_a": self.hash_a,
            "config_hash_b": self.hash_b,
            "same": self.hash_a == self.hash_b,
            "variables": self.variables,
            "differences": self.rows(),
            "warnings": self.warnings(),
        }


def show_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


_ABSENT = object()


def compare(
    fp_a: dict | None,
    fp_b: dict | None,
    name_a: str = "A",
    name_b: str = "B",
    hash_a: str | None = None,
    hash_b: str | None = None,
) -> Diff:
    from .fingerprint import config_hash

    hash_a = hash_a or (config_hash(fp_a) if fp_a else None)
    hash_b = hash_b or (config_hash(fp_b) if fp_b else None)
    out = Diff(name_a, name_b, hash_a, hash_b)
    if not fp_a or not fp_b:
        return out
    fa = flatten({k: v for k, v in fp_a.items() if k != "info"}, keep_empty=False)
    fb = flatten({k: v for k, v in fp_b.items() if k != "info"}, keep_empty=False)
    keys_a, keys_b = set(fa), set(fb)
    for key in sorted(keys_a | keys_b):
        va, vb = fa.get(key, _ABSENT), fb.get(key, _ABSENT)
        if va != vb:
            out.differences.append(
                Difference(
                    key,
                    None if va is _ABSENT else va,
                    None if vb is _ABSENT else vb,
                    variable_of(key, keys_a, keys_b),
                )
            )
    # an index's state (pages, dead tuples) stands alone only when its build is the same (a
    # VACUUM); its build only when nothing else of it differs (REINDEX): a new build implies a
    # new state, new options or columns a new build
    out.differences = _implied(_implied(out.differences, "state"), "build")
    return out


def _implied(differences: list[Difference], part: str) -> list[Difference]:
    """``differences`` without an index's ``part`` (build, state) when something else of that
    index differs too: the change is named by what else differs."""
    suffix = "." + part
    others = {d.variable for d in differences if not d.variable.endswith(suffix)}
    return [
        d
        for d in differences
        if not (
            d.variable.startswith("indexes.")
            and d.variable.endswith(suffix)
            and any(v.startswith(d.variable[: -len(part)]) for v in others)
        )
    ]


def load_fingerprint(conn: Any, name: str) -> tuple[dict | None, str | None, str]:
    """(fingerprint, config hash, kind) of a run, else of an experiment, by name."""
    row = conn.execute(
        "SELECT fingerprint, config_hash FROM pgeval.run WHERE name = %s", (name,)
    ).fetchone()
    if row is not None:
        return row[0], row[1], "run"
    row = conn.execute(
        "SELECT fingerprint, config_hash FROM pgeval.experiment WHERE name = %s", (name,)
    ).fetchone()
    if row is not None:
        return row[0], row[1], "experiment"
    raise NotFound(f"no run or experiment named '{name}' (see `pgeval run list`)")


def diff_runs(conn: Any, a: str, b: str) -> Diff:
    fp_a, h_a, _ = load_fingerprint(conn, a)
    fp_b, h_b, _ = load_fingerprint(conn, b)
    return compare(fp_a, fp_b, a, b, h_a, h_b)
