"""Iterative index scans as searched settings (pgvector 0.8): a filtered statement
(``WHERE tenant = $1 ORDER BY ... LIMIT K``) is searched with the scan off, as the server runs
it, and in each of the kind's iterative modes (HNSW ``strict_order``, ``relaxed_order``;
IVFFlat ``relaxed_order``) under the limits that bound how far the scan goes on
(``hnsw.max_scan_tuples``, ``hnsw.scan_mem_multiplier``; ``ivfflat.max_probes``: ``--set``'s,
else the server's, always printed). Each mode finds its own least work setting; the answer is
the least work that brings every group to the target across the modes (at equal work the
earlier mode),
compared with the database-wide setting the scan off needs. A group that no mode brings to the
target is *unreachable*, with the best point found and its cost. ``sweep --group-by --find``
(:mod:`.groups`) and ``advise --group-by`` (its rows measured through the index in place) ask
the same questions here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...measure.operating_points import reaches
from ...stages import gucs

OFF = "off"
# the iterative setting -> the limits its modes run under (pgvector's README, "Iterative
# Index Scans")
LIMITS: dict[str, tuple[str, ...]] = {
    "hnsw.iterative_scan": ("hnsw.max_scan_tuples", "hnsw.scan_mem_multiplier"),
    "ivfflat.iterative_scan": ("ivfflat.max_probes",),
}


def searched(database: Any, kind: Any, fixed: Mapping[str, str]) -> list[dict[str, str]]:
    """The iterative modes searched beside the plain scan, each with its limits:
    ``[{"hnsw.iterative_scan": "strict_order", "hnsw.max_scan_tuples": "20000", ...}, ...]``;
    [] where the kind has none, ``fixed`` (``--set``) chooses the mode already, or the server's
    pgvector has no iterative scan (before 0.8)."""
    if kind is None or kind.iterative_scan is None:
        return []
    setting, modes = kind.iterative_scan
    if setting in fixed:
        return []
    names = (setting, *LIMITS.get(setting, ()))
    with database.connect(results=False, read_only=True) as kb:
        kb.execute("SELECT '[1]'::vector")  # pgvector loaded: its settings are defined
        server = gucs.current(kb, names)
        kb.rollback()
    if server[setting] is None:
        return []
    limits = {n: str(fixed.get(n, server[n])) for n in names[1:] if n in fixed or server[n]}
    return [{setting: mode, **limits} for mode in modes]


# a mode that leaves a group under the target is searched once more with its limits raised
# (those ``--set`` does not fix): ten times the tuples (pgvector's 20,000 to 200,000, where
# ParadeDB measured HNSW with a 1 % filter at about 0.93), twice the memory
RAISE = {"hnsw.max_scan_tuples": 10, "hnsw.scan_mem_multiplier": 2}


def raised(mode: Mapping[str, str], fixed: Mapping[str, str]) -> dict[str, str] | None:
    """``mode`` with its limits raised (:data:`RAISE`); None where ``--set`` (``fixed``) names
    one of them (the limits are the user's) or the mode has none to raise (IVFFlat's
    ``max_probes`` defaults to every list already)."""
    free = {n: f for n, f in RAISE.items() if n in mode}
    if not free or any(n in fixed for n in RAISE):
        return None
    return {**mode, **{n: _times(mode[n], f) for n, f in free.items()}}


def _times(value: str, factor: int) -> str:
    number = float(value) * factor
    return str(int(number)) if number.is_integer() else str(number)


def mode_of(settings: Mapping[str, Any]) -> str:
    """The iterative mode ``settings`` name (``off`` where none does)."""
    return next((str(settings[s]) for s in LIMITS if s in settings), OFF)


@dataclass(frozen=True)
class ModeResult:
    """One scan mode's answer: the least value of the work setting at which every group reaches
    the target (else the value whose worst group came closest), its worst group and p95."""

    mode: str
    settings: dict[str, str]  # the mode's settings ({} : the scan as the server runs it)
    find: str
    value: int | None
    reached: bool
    p95_ms: float | None
    worst_group: str | None
    worst_recall: float | None

    @classmethod
    def of_groups(cls, mode: dict[str, str], res: Any, find: str) -> ModeResult:
        """One mode's answer from its grouped find (``groups.GroupSweepResult``): the point
        shown (the recommendation, else the point whose worst group comes closest)."""
        at = res.at or {}
        point: dict[str, Any] = next((p for p in res.points if p["point"] == at.get("point")), {})
        value = (at.get("settings") or {}).get(find)
        return cls(
            mode=mode_of(mode),
            settings=dict(mode),
            find=find,
            value=None if value is None else int(value),
            reached=res.recommendation is not None and not res.failed,
            p95_ms=point.get("p95_ms"),
            worst_group=point.get("worst_group"),
            worst_recall=point.get("worst_recall"),
        )

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "find"}

    def words(self) -> str:
        """``hnsw.ef_search 64 with hnsw.iterative_scan = relaxed_order (p95 1.20 ms)``."""
        how = " for every query (iterative scan off)" if self.mode == OFF else self.with_mode()
        p95 = "" if self.p95_ms is None else f" (p95 {self.p95_ms:.2f} ms)"
        if self.reached:
            return f"{self.find} {self.value}{how}{p95}"
        worst = "" if self.worst_recall is None else f" {self.worst_recall:.4f}"
        return (
            f"not reached{how}: at best {self.find} {self.value} leaves "
            f"{self.worst_group}{worst}{p95}"
        )

    def with_mode(self) -> str:
        """`` with hnsw.iterative_scan = relaxed_order (hnsw.max_scan_tuples 20000, ...)``."""
        return with_settings(self.settings)


def with_settings(settings: Mapping[str, str]) -> str:
    """A mode's settings in words: the mode, its limits in brackets."""
    items = list(settings.items())
    if not items:
        return ""
    (name, mode), limits = items[0], items[1:]
    said = ", ".join(f"{k} {v}" for k, v in limits)
    return f" with {name} = {mode}" + (f" ({said})" if said else "")


def cheapest(results: Sequence[ModeResult]) -> ModeResult | None:
    """The least work reaching the target in every group: the least value; at equal value the
    earlier mode (the scan off first, then the one keeping the most order), not the lower p95:
    at one ``ef_search`` an iterative scan does at least the plain scan's work (it goes on
    where the plain one stops), so a lower p95 there is noise (``bench/advise_tenants.py``:
    three modes at ``ef_search`` 502, p95 39.6 to 50.9 ms in one run)."""
    reached = [(i, r) for i, r in enumerate(results) if r.reached and r.value is not None]
    if not reached:
        return None
    return min(reached, key=lambda ir: (ir[1].value, ir[0]))[1]


def line(results: Sequence[ModeResult]) -> str | None:
    """The answer in words: "hnsw.ef_search 398 for every query (iterative scan off), or
    hnsw.ef_search 64 with hnsw.iterative_scan = relaxed_order: the least work"; the other
    modes after it."""
    if len(results) < 2:
        return None
    chosen = cheapest(results)
    if chosen is None:
        said = "; ".join(r.words() for r in results)
        return f"no scan mode reaches the target in every group: {said}"
    plain = results[0]
    rest = [r.words() for r in results if r is not chosen and r is not plain]
    also = f" (also measured: {'; '.join(rest)})" if rest else ""
    if chosen is plain:
        return f"{chosen.words()}: the least work{also}"
    joint = ", or " if plain.reached else "; "
    slower = (
        f"; note: its p95 is {chosen.p95_ms / plain.p95_ms:.1f}x the scan off's"
        if plain.reached
        and chosen.p95_ms is not None
        and plain.p95_ms
        and chosen.p95_ms > 1.5 * plain.p95_ms
        else ""
    )
    return f"{plain.words()}{joint}{chosen.words()}: the least work{slower}{also}"


def unreachable(
    seen: Iterable[tuple[ModeResult, Sequence[Mapping[str, Any]]]], target: float
) -> list[dict[str, Any]]:
    """The groups no mode brings to ``target``: each with its rows, its share of the rows and
    the best point found for it (its mode, value, recall and p95). ``seen``: each mode with
    the group rows it measured (``group``, ``rows``, ``share``, ``recall``, ``p95_ms``; one
    row per group and point)."""
    best: dict[str, tuple[ModeResult, Mapping[str, Any]]] = {}
    met: set[str] = set()
    for mode, rows in seen:
        for g in rows:
            name = str(g["group"])
            if reaches(g.get("recall"), target):
                met.add(name)
            held = best.get(name)
            if held is None or (g.get("recall") or 0.0) > (held[1].get("recall") or 0.0):
                best[name] = (mode, g)
    return [
        {
            "group": name,
            "rows": g.get("rows"),
            "share": g.get("share"),
            "best": {
                **({"design": g["design"]} if g.get("design") else {}),
                "mode": mode.mode,
                "settings": mode.settings,
                "value": g.get("value", mode.value),
                "recall": g.get("recall"),
                "p95_ms": g.get("p95_ms"),
            },
        }
        for name, (mode, g) in best.items()
        if name not in met
    ]


def unreachable_line(groups: Sequence[Mapping[str, Any]], find: str, column: str) -> str | None:
    """``unreachable: tenant=t2 (2.0 % of the rows): at best 0.8700 at hnsw.ef_search 1000 with
    hnsw.iterative_scan = strict_order, p95 3.10 ms``."""
    if not groups:
        return None
    parts = []
    for g in groups:
        b = g["best"]
        share = "" if g.get("share") is None else f" ({g['share'] * 100:.1f} % of the rows)"
        how = with_settings(b["settings"])
        p95 = "" if b.get("p95_ms") is None else f", p95 {b['p95_ms']:.2f} ms"
        recall = "n/a" if b.get("recall") is None else f"{b['recall']:.4f}"
        design = f"{b['design']} " if b.get("design") else ""
        parts.append(
            f"{column}={g['group']}{share}: at best {recall} at {design}{find} {b['value']}"
            f"{how}{p95}"
        )
    return "unreachable (no setting searched brings it to the target): " + "; ".join(parts)
