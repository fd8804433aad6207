"""The API's methods that read numbers: metrics, stage report, compare, gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._errors import api, cut_offs


class NumberMethods:
    database: Any
    option_names: bool

    @api
    def metrics(
        self,
        run: str,
        *,
        measures: list[str] | None = None,
        k=None,
        ndcg_k=None,
        mrr_k=None,
        rel: int = 1,
        per_query: bool = False,
        by_type: bool = False,
        flagged: bool = False,
        plans: bool = False,
        domain_discount: float = 0.0,
        min_score: float | None = None,
        strict: bool = False,
        allow_partial: bool = False,
    ):
        """Means over valid queries of run ``run`` (`pgeval metrics`). ``measures``: names such
        as ``["recall@10", "ndcg@10"]``, else the ones the cut-offs ``k``, ``ndcg_k``, ``mrr_k``
        ask for (default: the command's). Returns an Evaluation (``summary``, ``levels``,
        ``counts``, ``per_query``, ``by_type``, ``flagged``, ``plans``)."""
        from ..measure.metrics import evaluate_in, measures_for

        if measures is None:
            measures = measures_for(
                cut_offs(k, "k"), cut_offs(ndcg_k, "ndcg_k"), cut_offs(mrr_k, "mrr_k")
            )
        return evaluate_in(
            self.database,
            run,
            list(measures),
            rel=rel,
            domain_discount=domain_discount,
            with_per_query=per_query,
            with_by_type=by_type,
            with_flagged=flagged or plans,
            strict=strict,
            allow_partial=allow_partial,
            min_score=min_score,
            plans=plans,
        )

    @api
    def stage_report(
        self,
        experiment: str,
        *,
        k: int = 10,
        rel: int = 1,
        repetition: int | str | None = None,
        worst: int = 10,
        strict: bool = False,
        allow_partial: bool = False,
    ):
        """The stages of ``experiment`` side by side and the loss attribution
        (`pgeval stage-report`); ``repetition`` None means all (means and spread). Returns a
        StageReport; ``as_dict()`` is what ``--format json`` prints."""
        from ..measure.stage_report import report

        return report(
            self.database,
            experiment,
            k=k,
            rel=rel,
            repetition=repetition,
            worst=worst,
            allow_partial=allow_partial,
            strict=strict,
        )

    @api
    def compare(
        self,
        baseline: str,
        candidate: str,
        *,
        measures: list[str] | None = None,
        rel: int = 1,
        alpha: float = 0.05,
        permutations: int = 10_000,
        seed: int = 0,
        top: int = 10,
        moved_by: str | None = None,
        allow_partial: bool = False,
    ):
        """Candidate against baseline (runs, experiments or saved JSON reports), query by query,
        with significance (`pgeval compare`); returns a Comparison."""
        from ..reporting.compare import compare_specs

        return compare_specs(
            self.database,
            baseline,
            candidate,
            measures=measures,
            rel=rel,
            allow_partial=allow_partial,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            top=top,
            moved_by=moved_by,
        )

    @api
    def gate(
        self,
        baseline: str,
        candidate: str,
        rules: str | Path | None = None,
        *,
        rel: int = 1,
        allow_partial: bool = False,
    ):
        """The release gate (`pgeval gate`): a GateResult whose ``passed`` says whether every
        applicable rule passed (nothing is raised on failure). ``rules``: a TOML file, None for
        the built-in rules."""
        from ..reporting.gate import gate

        return gate(self.database, baseline, candidate, rules, rel=rel, allow_partial=allow_partial)
