"""`pgeval tune`: the flow (read the stage, expand the grid, measure every configuration,
cross-validate the choice, recommend or keep, store the in-sample pick as a run) and its result."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.errors import InputError
from ...measure.measures import ranked
from . import evaluate, grid, select, stage_lists
from .result import TuneResult
from .stage_lists import StageLists

if TYPE_CHECKING:
    from ...core.db import Database

FIGURES = ("recall@10", "mrr@20")  # shown beside the chosen metric, with judged@10
DEFAULT_K = (10, 20, 40, 60, 100)
DEFAULT_WEIGHTS = (0.5, 1.0, 2.0)
DEFAULT_TOP_N = (5, 10, 20, 30, 50, 100, 200)


def default_grid(lists: StageLists) -> dict[str, list]:
    """The grid when none is given: merge, RRF's k by the weights of each input (0.5, 1, 2),
    and min-max and z-score fusion by the same weights; rerank, top_n up to the scored one."""
    if lists.kind == "rerank":
        most = lists.current["top_n"]
        return {"top_n": [n for n in DEFAULT_TOP_N if n < most] + [most]}
    import itertools

    n = len(lists.inputs)
    weights = list(itertools.product(DEFAULT_WEIGHTS, repeat=n)) if n <= 3 else []
    return {
        "method": ["rrf", "minmax", "zscore"],
        "k": list(DEFAULT_K),
        **({"weights": weights} if weights else {}),
    }


def _check(lists: StageLists, configs: list[dict], folds: int) -> None:
    if lists.kind == "rerank":
        most = lists.current["top_n"]
        over = sorted({c["top_n"] for c in configs if c["top_n"] > most})
        if over:
            raise InputError(
                f"--grid {lists.stage}:top_n={over[0]}: run '{lists.run_name}' scored the top "
                f"{most} of its input; a larger top_n needs the reranker again (`run pipeline "
                f"--opt {lists.stage}:top_n={over[-1]}`)",
                field="--grid",
            )
    if folds < 2:
        raise InputError(f"--folds {folds}: at least 2", field="--folds")


def _why(result: dict[str, Any], n: int, metric: str) -> tuple[bool, str]:
    held: select.HeldOut = result["held_out"]
    gain_in = result["gain_in"]
    figures = (
        f"held-out gain of the choice among {n} configurations ({len(held.folds)}-fold "
        f"cross-validation): {held.gain:+.4f} {metric} (95% interval [{held.ci_low:+.4f}, "
        f"{held.ci_high:+.4f}], p = {held.p_value:.4f}); in sample {gain_in:+.4f}"
    )
    if result["best"] == 0:
        return True, f"the current configuration is the best in sample; {figures}"
    if held.gain > 0 and held.p_value < select.ALPHA:
        return False, f"{figures}: significant at {select.ALPHA}"
    return True, (
        f"{figures}: not significant at {select.ALPHA}, so the in-sample best does not "
        "hold on queries it was not chosen on"
    )


def tune(
    database: Database,
    experiment: str,
    stage: str,
    grid_specs: list[str],
    *,
    metric: str = "ndcg@10",
    folds: int = 5,
    seed: int = 0,
    repetition: int = 1,
    rel: int = 1,
    jobs: int = 2,
    name: str | None = None,
    store: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> TuneResult:
    """Tune ``stage`` of ``experiment`` over the grid (docs/tune.md)."""
    metric = ranked([metric], "metric")[0]
    with database.connect(read_only=True) as conn:
        lists = stage_lists.read(conn, experiment, stage, repetition)
        conn.rollback()
    specs = grid.parse(grid_specs, stage, lists.kind, lists.inputs) if grid_specs else None
    configs = grid.configurations(specs or default_grid(lists), lists.current)
    _check(lists, configs, folds)
    measures = list(dict.fromkeys([metric, *FIGURES]))
    figures = evaluate.measure(
        database, lists, configs, measures, rel=rel, jobs=jobs, on_progress=on_progress
    )
    if folds > len(figures.queries):
        raise InputError(f"--folds {folds}: more folds than valid queries", field="--folds")
    means = figures.values.mean(axis=1)
    best = select.best(means[:, 0])
    held = select.cross_validate(figures.values[:, :, 0], folds, seed)
    gain_in = float(means[best, 0] - means[0, 0])
    keep, why = _why({"held_out": held, "best": best, "gain_in": gain_in}, len(configs), metric)
    result = TuneResult(
        lists, metric, figures.measures, figures.queries, configs, means, best, held, keep, why
    )
    if store:
        from .store import store_pick

        result = store_pick(database, result, name)
    return result
