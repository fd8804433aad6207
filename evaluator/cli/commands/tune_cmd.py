"""`pgeval tune EXPERIMENT --stage merge|rerank --grid STAGE:KEY=V1,V2`: a stage's options tried
on the stored lists, the choice cross-validated, a change recommended only when it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..flags import NAME, REPETITION, SEED, STAGE, format_option
from ..output import echo_line, emit, printed_json, warn
from .common import OneTask, pass_api

if TYPE_CHECKING:
    from ...api import Pgeval
    from ...api.results import TuneResult

SHOWN = 10  # configurations listed by the table (all of them: --format json)


def _varying(result: TuneResult) -> list[str]:
    """The keys whose value differs between configurations (the others are in the header)."""
    return [k for k in result.configs[0] if len({repr(c[k]) for c in result.configs}) > 1]


def _short(key: str, value: object) -> str:
    """key=value as the table shows it: a per-input value positional, [1,0.5] (all: no cut)."""
    if isinstance(value, tuple):
        value = f"[{','.join('all' if v is None else f'{v:g}' for v in value)}]"
    elif isinstance(value, float):
        value = f"{value:g}"
    return f"{key}={value}"


def _rows(result: TuneResult) -> list[dict]:
    order = sorted(range(len(result.configs)), key=lambda i: -result.means[i][0])
    shown = list(dict.fromkeys([0, *order[:SHOWN]]))
    keys = _varying(result)
    rows = []
    for i in shown:
        row = {"#": i, "setting": " ".join(_short(k, result.configs[i][k]) for k in keys)}
        row.update(dict(zip(result.measures, result.means[i])))
        row["note"] = "current" if i == 0 else ("best" if i == order[0] else "")
        rows.append(row)
    return rows


def _print(result: TuneResult) -> None:
    d = result.as_dict()
    echo_line(
        f"{d['experiment']} · stage {d['stage']} ({d['kind']}, run {d['run']}) · "
        f"{len(result.configs)} configurations · {d['queries']} valid queries · metric "
        f"{d['metric']}"
    )
    varying = _varying(result)
    fixed = {k: v for k, v in result.configs[0].items() if k not in varying}
    if fixed:
        echo_line("the same in every configuration: " + " ".join(result.lists.as_opts(fixed)))
    if result.lists.kind == "merge":
        echo_line(f"inputs, in the order of [..] values: {', '.join(result.lists.inputs)}")
    emit(
        _rows(result),
        "table",
        ["#", "setting", *result.measures, "note"],
        title=f"in sample (mean over valid queries), best {SHOWN} by {result.metric}",
    )
    h = d["held_out"]
    echo_line(
        f"held out ({len(h['folds'])}-fold cross-validation of the choice): gain {h['gain']:+.4f} "
        f"{result.metric}, 95% interval [{h['interval'][0]:+.4f}, {h['interval'][1]:+.4f}], "
        f"p = {h['p']:.4f}; chosen per fold: {', '.join(f'#{c}' for c in h['chosen'])}"
    )
    rec = d["recommendation"]
    if rec["keep"]:
        echo_line(f"keep the current configuration: {rec['why']}")
    else:
        echo_line(f"recommended: {' '.join('--opt ' + o for o in rec['opts'])}: {rec['why']}")
    if d["stored_run"]:
        echo_line(
            f"the in-sample best is stored as run '{d['stored_run']}' "
            f"(pgeval metrics {d['stored_run']}; pgeval compare {d['run']} {d['stored_run']})"
        )


@click.command()
@click.argument("experiment")
@STAGE.but(type=str, metavar="NAME", help="The merge or rerank stage to tune.")
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="STAGE:KEY=V1,V2,...",
    help="Values to try, comma-separated, a list bracketed ([1,0.5]); repeat for more keys "
    "(every combination is tried). merge: method, k, weights, input_depth, depth; rerank: "
    "top_n (at most the run's own). [default: merge: method rrf,minmax,zscore x k "
    "10,20,40,60,100 x each input's weight 0.5,1,2; rerank: top_n 5,10,20,30,50,... up to "
    "the run's]",
)
@click.option(
    "--metric", default="ndcg@10", show_default=True, help="The measure the choice maximises."
)
@click.option(
    "--folds",
    type=click.IntRange(2, 1000),
    default=5,
    show_default=True,
    help="Folds of the cross-validation of the choice.",
)
@SEED.but(default=0, show_default=True, help="Seed of the folds and of the paired test.")
@REPETITION.but(
    type=click.IntRange(1), default=1, metavar=None, help="The repetition whose lists are tuned."
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Connections measuring configurations at once.",
)
@NAME.but(help="Name of the run storing the in-sample best. [default: EXPERIMENT.STAGE.tuned]")
@click.option("--no-store", is_flag=True, help="Store no run.")
@format_option(choices=("table", "json"))
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@pass_api
def tune(
    pg: Pgeval,
    experiment: str,
    stage: str,
    grid: tuple[str, ...],
    no_store: bool,
    fmt: str,
    as_json: bool,
    **options: Any,
) -> None:
    """Tune the merge or rerank stage of EXPERIMENT on its stored lists, held out.

    \b
    Every combination of the grid is computed in SQL from the lists the experiment stored
    (pgeval.fuse_rrf / fuse_scores over the retrieval runs; for a rerank, the scores its
    reranker gave the top_n candidates): no earlier stage is searched again, no reranker
    called. Per configuration: the in-sample means of the metric, recall@10, MRR@20 and
    judged@10 (the share of the top 10 carrying a judgement: low, and every figure is a
    lower bound). Then the choice itself is cross-validated: the queries are split into
    --folds folds; the best configuration on the other folds is scored on each fold. The
    held-out gain over the experiment's own configuration, with its paired randomisation
    test and bootstrap interval, decides: a change is recommended only when it is
    significant (p < 0.05), else "keep the current configuration". The in-sample best is
    stored as a run, so that metrics, compare and gate read it (docs/tune.md).

    \b
    Examples:
      pgeval tune exp1 --stage merge
      pgeval tune exp1 --stage merge --grid merge:k=10,60 --grid merge:weights=[1,0.5],[1,1],[1,2]
      pgeval tune exp1 --stage merge --grid merge:input_depth=10,20,[hnsw:10,bm25:40] --json
      pgeval tune exp1 --stage rerank --grid rerank:top_n=10,20,30 --metric recall@10
    """
    with OneTask() as bar:
        result = pg.tune(
            experiment,
            stage,
            list(grid),
            store=not no_store,
            on_progress=lambda done, total: bar.show(f"tune {stage}: configurations", done, total),
            **options,  # the others under their names
        )
    warn(*result.warnings)
    if printed_json("json" if as_json else fmt, result.as_dict()):
        return
    _print(result)
