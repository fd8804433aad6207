"""`pgeval gate`: exit 2 when a release rule fails (0 pass, 1 error)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..flags import ALLOW_PARTIAL, REL, format_option
from ..output import emit, printed_json, warn
from .common import pass_api

if TYPE_CHECKING:
    from ...api import Pgeval


def _show_defaults(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from ...api.vocabulary import DEFAULT_RULES

        click.echo(DEFAULT_RULES, nl=False)
        ctx.exit(0)


@click.command()
@click.option(
    "--baseline",
    required=True,
    metavar="RUN|REPORT.json",
    help="What ships today: a run name or a saved JSON report.",
)
@click.option(
    "--candidate",
    required=True,
    metavar="RUN|REPORT.json",
    help="What would ship: a run name or a saved JSON report.",
)
@click.option(
    "--rules",
    type=click.Path(dir_okay=False),
    metavar="FILE.toml",
    help="Gate rules (TOML). [default: the built-in rules, see --show-defaults]",
)
@REL.but(help="Lowest relevant grade, for sides given as run names.")
@ALLOW_PARTIAL
@click.option(
    "--show-defaults",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_show_defaults,
    help="Print the built-in rules as TOML and exit.",
)
@format_option(choices=("table", "json"))
@pass_api
def gate(
    pg: Pgeval,
    baseline: str,
    candidate: str,
    rules: str | None,
    rel: int,
    allow_partial: bool,
    fmt: str,
) -> None:
    """Release gate: check CANDIDATE against BASELINE under TOML rules; exit code 2 on failure.

    Every rule is checked and every failure printed. A rule whose metric neither side has (no
    answers imported, say) is "n/a", never "pass". Exit codes: 0 every applicable rule passed,
    1 error (bad rules file, unknown run, different test sets), 2 a rule failed.

    \b
    Built-in rules (METRICS.md): recall@10 must not drop; mrr@20 may drop at most 0.01;
    citation_precision >= 0.97; answer_accuracy must not drop; p95 latency (retrieval and
    end-to-end) may grow at most 20 %.

    \b
    Rule kinds, per [metrics.NAME] table:
      min = 0.97 | max = 800 | max_drop = 0.01 | max_drop_pct = 2
      must_not_drop = true | must_not_drop_significantly = true
      max_growth_pct = 20

    \b
    Examples:
      pgeval gate --baseline baseline.json --candidate hnsw-ef40
      pgeval gate --baseline prod-run --candidate new-run --rules gates.toml; echo $?
      pgeval gate --show-defaults > gates.toml
    """
    from ...core.errors import GateFailed

    result = pg.gate(baseline, candidate, rules, rel=rel, allow_partial=allow_partial)
    warn(*result.warnings)
    if not printed_json(fmt, result.as_dict()):
        click.echo(
            f"gate: baseline {result.baseline} · candidate {result.candidate} · "
            f"rules {result.rules_source}"
        )
        emit(
            [
                {
                    "status": o.status.upper() if o.status == "fail" else o.status,
                    "metric": o.rule.metric,
                    "rule": o.rule.describe(),
                    "baseline": o.baseline,
                    "candidate": o.candidate,
                }
                for o in result.outcomes
            ],
            "table",
            ["status", "metric", "rule", "baseline", "candidate"],
        )
        for o in result.outcomes:
            if o.status != "pass":
                click.echo(f"{'FAIL' if o.status == 'fail' else 'n/a '}  {o.reason}")
    failures = result.failures
    if failures:
        raise GateFailed(
            f"gate failed: {len(failures)} of {len(result.outcomes)} rules failed "
            f"({', '.join(o.rule.metric for o in failures)})"
        )
    if fmt != "json":
        applicable = sum(o.status == "pass" for o in result.outcomes)
        click.echo(
            f"gate passed: {applicable} rules passed, "
            f"{len(result.outcomes) - applicable} not applicable"
        )
