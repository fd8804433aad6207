"""An advise's flow (docs/advise.md, "A large table"): the design the table has (the anchor)
measured in place, the others screened on a sample and pruned (:mod:`.prune`), and at most one
built in full.

- A table of at most :data:`SCREEN_ABOVE` rows (and no ``--sample-rows`` below its size): every
  design measured at the table's size, the table's indexes in place, the others built in full.
- A larger one (or ``--sample-rows N``): every design, the anchor too, screened on one sample
  of :func:`sample_size` rows; the anchor measured on the table, in place; of the others the one
  the screening says can beat the anchor beyond noise (with no anchor: the best screened) built
  in full, on the held-out copy of every row or, with ``--confirm-on-table``, on the table.

Every build is on a copy without the sampled query rows (:mod:`.sample`): they are true
held-out queries there. Every row says where it was measured (``measured_where``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ...kinds import registry
from . import held_out, predict, prune, rules, sample
from .outcome import OnSample, Outcome, Screening
from .plan import AdviseConfig, Design

# tables up to this many rows: every design measured at the table's size (no screening)
SCREEN_ABOVE = 100_000
# the screening sample: a tenth of the rows, between these
SAMPLE_MIN, SAMPLE_MAX = 20_000, 100_000
AFTER = "measure it after building"  # a screened design's setting on the table


def sample_size(table_rows: int, given: int | None) -> int | None:
    """The rows every design is screened on (None: no screening, every design in full)."""
    if given is not None:
        return given if given < table_rows else None
    if table_rows <= SCREEN_ABOVE:
        return None
    return max(SAMPLE_MIN, min(SAMPLE_MAX, table_rows // 10))


def table_rows(database: Any, name: str) -> int:
    from ...table.target_table import row_count
    from ...targets import targets

    with database.connect() as conn:
        target = targets.load(conn, name)
    with database.connect(results=False, read_only=True) as kb:
        n = row_count(kb, target)
        kb.rollback()
    return n


@contextmanager
def full_copy(
    database: Any, cfg: AdviseConfig, column: str | None, held: tuple[str, ...], rows: int
) -> Iterator[sample.Sample]:
    """Where a design is built in full: the held-out copy of every row (sampled query rows
    left out), else the table's own rows (a scratch copy of them, as ``sweep --build``)."""
    if not held:
        yield sample.Sample(cfg.target, rows, rows)
        return
    with sample.copy(database, cfg.target, None, column, held) as full:
        yield full


def where(s: sample.Sample, *, screening: bool) -> str:
    what = "a sample" if screening else "every row"
    held = f", {s.held_out:,} sampled query rows held out" if s.held_out else ""
    return f"scratch copy of {s.rows:,} rows ({what}{held})"


def in_full(
    database: Any,
    cfg: AdviseConfig,
    plan: list[Design],
    column: str | None,
    measured: Any,
    held: tuple[str, ...],
    rows: int,
) -> list[Outcome]:
    """Every design at the table's size: in place where the table has it, else built in full;
    one in place measured with sampled rows (``held``) measured again on the held-out copy
    (:mod:`.held_out`: no estimate of its build here, a table this small builds in time)."""
    out: list[Outcome | None] = [None] * len(plan)
    placed = [i for i, d in enumerate(plan) if d.in_place]
    remeasured = placed if held else []
    measured.total = len(plan) + len(remeasured)
    for i in placed:
        out[i] = replace(measured.one(plan[i], cfg.target), measured_where="table")
    built = [i for i, d in enumerate(plan) if not d.in_place]
    if built or remeasured:
        with full_copy(database, cfg, column, held, rows) as full:
            for i in built:
                row = measured.one(plan[i], full.target)
                here = "table" if row.in_place else where(full, screening=False)
                out[i] = replace(row, measured_where=here)
            for i in remeasured:
                in_place = out[i]
                assert in_place is not None
                copy = where(full, screening=False)
                out[i] = held_out.again(measured, plan[i], in_place, full.target, copy, None)
            measured.result.held_out = full.held_out
    return [replace(r, measured_on="table") for r in out if r is not None]


def gap(
    row: Mapping[str, Any], screened: Mapping[str, Any], find: str, rows: int, on: str, goal: float
) -> str:
    """``on 50,000 rows ef_search 15 reached 0.95; the table needs 40``."""
    short = find.split(".", 1)[-1]
    was = screened["setting"].get(find)
    now = row["setting"].get(find)
    said = (
        f"on {rows:,} rows {short} {was} reached {goal:g}"
        if screened.get("reached")
        else f"on {rows:,} rows no {short} up to {was} reached {goal:g}"
    )
    if row.get("reached"):
        return f"{said}; {on} needs {now}"
    return f"{said}; {on} reaches it at no {short} tried (the best: {now})"


def anchor_of(
    plan: list[Design], table: dict[int, Outcome], budgets: dict[str, float]
) -> tuple[int | None, bool]:
    """(the anchor: of the designs in place, the one the recommendation's rule prefers among
    those meeting the target within the budgets on the table, else the first; whether it meets
    them)."""
    if not table:
        return None, False
    ok = [
        i
        for i, r in table.items()
        if r.get("reached")
        and r.get("p95_ms") is not None
        and not rules.over_budgets(r, budgets, 1.0)
    ]
    if not ok:
        return min(table), False
    best, _ = rules.pick([table[i] for i in ok])
    return next(i for i in ok if table[i] is best), True


KEEP = ("setting", "recall", "p95_ms", "p95_low", "p95_high", "index_bytes", "build_ms")


def screened(
    database: Any,
    cfg: AdviseConfig,
    plan: list[Design],
    column: str | None,
    measured: Any,
    held: tuple[str, ...],
    rows: int,
    size: int,
) -> list[Outcome]:
    """The anchor on the table, every design on a sample, at most one built in full (see the
    module's docstring); the rows in the plan's order."""
    from . import recommend

    result = measured.result
    budgets = recommend.budgets(cfg)
    placed = {i for i, d in enumerate(plan) if d.in_place}
    measured.total = len(placed) + len(plan) + 1  # (the one full build, if any)
    table = {i: replace(measured.one(plan[i], cfg.target), measured_where="table") for i in placed}
    with sample.copy(database, cfg.target, size, column, held) as s:
        here = where(s, screening=True)
        on_sample = [replace(r, measured_where=here) for r in measured.all(plan, s.target)]
    result.screened_on = s.rows
    result.screen = {
        "target": s.target,
        "rows": s.rows,
        "table_rows": s.of,
        "held_out": s.held_out,
        "samples": 1,
    }
    if held:  # the table's indexes measured with sampled rows: again on a held-out copy
        _measured_held_out(database, cfg, plan, column, measured, held, rows, table, on_sample)
    anchor, anchor_ok = anchor_of(plan, table, budgets)
    result.anchor = None if anchor is None else plan[anchor].label
    with database.connect(results=False, autocommit=True) as kb:
        ceilings = recommend.ceilings(kb, on_sample)
    chosen, result.dropped = prune.verdicts(
        [d.label for d in plan],
        [d.find for d in plan],
        on_sample,
        anchor,
        anchor_ok,
        rows=s.rows,
        scale=rows / max(s.rows, 1),
        budgets=budgets,
        ceilings=ceilings,
        target_recall=cfg.target_recall,
        placed=placed,
    )
    full: Outcome | None = None
    if chosen is not None and anchor_ok:  # (the anchor is the answer meanwhile)
        if not _within_budget(cfg, plan[chosen].label, on_sample[chosen], rows, s.rows, result):
            chosen = None
    if chosen is not None:
        full = _build_in_full(
            database, cfg, plan[chosen], on_sample[chosen], column, measured, held, rows, s.rows
        )
        result.confirmed.append(plan[chosen].label)
    measured.total = measured.done
    why = {d["design"]: d["why"] for d in result.dropped}
    out = []
    for i, d in enumerate(plan):
        if i in table or i == chosen:
            row = table[i] if i in table else full
            assert row is not None
            on = "the table" if row.measured_where == "table" else f"the {row.measured_where}"
            said = gap(row, on_sample[i], d.find, s.rows, on, cfg.target_recall)
            screening = Screening(_screen(on_sample[i], s.rows), said)
            out.append(replace(row, screening=screening, measured_on="table"))
            continue
        predicted = None
        if anchor is not None and plan[anchor].find == d.find:  # (the same work setting)
            predicted = predict.carried(
                on_sample[i], on_sample[anchor], table[anchor], d.find, plan[anchor].label, s.rows
            )
        verdict = OnSample(why.get(d.label), AFTER, predicted)
        out.append(replace(on_sample[i], measured_on="sample", on_sample=verdict))
    return out


def _screen(on_sample: Outcome, rows: int) -> dict[str, Any]:
    """What the screening measured of a design built in full: its sample's figures."""
    kept = {k: on_sample.get(k) for k in KEEP}
    return {**kept, "sweep": on_sample["sweep"], "reached": on_sample["reached"], "rows": rows}


def _measured_held_out(
    database: Any,
    cfg: AdviseConfig,
    plan: list[Design],
    column: str | None,
    measured: Any,
    held: tuple[str, ...],
    rows: int,
    table: dict[int, Outcome],
    on_sample: list[Outcome],
) -> None:
    """Each index in place (``table``, measured with sampled rows) built again on the held-out
    copy of every row when its build, estimated from the sample's, fits --max-confirm-s
    (:mod:`.held_out`); the others stay upper bounds, said so."""
    sample_rows = measured.result.screen["rows"]
    estimates = {i: rules.estimated_build_s(on_sample[i], rows, sample_rows) for i in table}
    fit = [i for i in table if held_out.fits(cfg, estimates[i])]
    for i in table:
        if i not in fit:
            table[i] = held_out.not_built(
                cfg, plan[i], table[i], estimates[i] or 0.0, measured.result.notes
            )
    if not fit:
        return
    measured.total += len(fit)
    with full_copy(database, cfg, column, held, rows) as full:
        copy = where(full, screening=False)
        for i in fit:
            table[i] = held_out.again(measured, plan[i], table[i], full.target, copy, estimates[i])
        measured.result.held_out = full.held_out


def _within_budget(
    cfg: AdviseConfig, label: str, row: Mapping[str, Any], rows: int, sample_rows: int, result: Any
) -> bool:
    """Whether the challenger's build on the table's rows, estimated from the sample's, is
    within ``--max-confirm-s`` (or unknown, or no bound); if not, it is said in ``result``'s
    ``dropped``, ``full_build`` and ``notes``: it may beat the index the table has, and what
    builds it."""
    estimate = rules.estimated_build_s(row, rows, sample_rows)
    if estimate is None or held_out.fits(cfg, estimate):
        return True
    bound = cfg.max_confirm_s
    why = (
        f"it may beat the index your table has (p95 on {sample_rows:,} rows below the index's "
        f"beyond their noise), but its build on {rows:,} rows is estimated at {estimate:,.0f} s "
        f"(the sample's {row['build_ms'] / 1000:,.1f} s at rows^{rules.BUILD_GROWTH:g}), over "
        f"--max-confirm-s {bound:g}: not built in full"
    )
    result.dropped.append({"design": label, "why": why})
    result.full_build = {
        "design": label,
        "built": False,
        "estimated_build_s": estimate,
        "max_confirm_s": bound,
    }
    result.notes.append(
        f"{label} was not built in full: to measure it at the table's size, run the same advise "
        f"with --max-confirm-s {prune.round_up(estimate * 1.5)} (on a scratch copy of every row; "
        "--confirm-on-table: CONCURRENTLY on your table); until then the recommendation is among "
        "the designs measured at the table's size"
    )
    return False


def _build_in_full(
    database: Any,
    cfg: AdviseConfig,
    design: Design,
    on_sample: Outcome,
    column: str | None,
    measured: Any,
    held: tuple[str, ...],
    rows: int,
    sample_rows: int,
) -> Outcome:
    """The chosen challenger at the table's size: built on the held-out copy of every row, or
    (``--confirm-on-table``) built CONCURRENTLY on the table and measured there."""
    estimate = rules.estimated_build_s(on_sample, rows, sample_rows)
    head = {"design": design.label, "built": True, "estimated_build_s": estimate}
    if cfg.confirm_on_table and not registry.KINDS[design.kind].labels:
        # (a label-filtered design adds a column to the table: built on the copy instead)
        from . import confirm

        row = replace(
            confirm.on_table(database, cfg, design, measured, estimate), measured_where="table"
        )
        built = row.built_on_table or {}
        where_ = {"on": "table", "index": built["name"], "rows": rows, "build_s": built["build_s"]}
        measured.result.full_build = {**head, **where_}
        return row
    measured.result.full_build = head  # (said before the build: a failure leaves it)
    with full_copy(database, cfg, column, held, rows) as full:
        row = measured.one(design, full.target, eta=estimate)
        measured.result.held_out = full.held_out
    row = replace(row, measured_where=where(full, screening=False))
    build_s = (row.get("build_ms") or 0) / 1000.0 or None
    measured.result.full_build = {
        **head,
        "on": "scratch copy",
        "rows": full.rows,
        "build_s": build_s,
    }
    return row
