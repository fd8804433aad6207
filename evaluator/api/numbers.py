"""The API's methods that read numbers: metrics, stage report, compare, gate."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._keywords import cut_offs

if TYPE_CHECKING:
    from ..core.db import Database
    from ..measure.answers import ImportReport
    from ..measure.metrics import Evaluation
    from ..measure.stage_report import StageReport
    from ..reporting.compare import Comparison
    from ..reporting.compare_many import MultiComparison
    from ..reporting.gate import GateResult

# a cut-off or several: 10, [5, 10]
CutOffs = int | Iterable[int]


class NumberMethods:
    database: Database

    def metrics(
        self,
        run: str,
        *,
        measures: list[str] | None = None,
        k: CutOffs | None = None,
        ndcg_k: CutOffs | None = None,
        mrr_k: CutOffs | None = None,
        rel: int = 1,
        per_query: bool = False,
        by_type: bool = False,
        flagged: bool = False,
        plans: bool = False,
        domain_discount: float = 0.0,
        min_score: float | None = None,
        strict: bool = False,
        allow_partial: bool = False,
        judged_only: bool = False,
    ) -> Evaluation:
        """Means over valid queries of run ``run`` (`pgeval metrics`). ``measures``: names such
        as ``["recall@10", "ndcg@10"]``, else the ones the cut-offs ``k``, ``ndcg_k``, ``mrr_k``
        ask for (default: the command's); judged@K is added. ``judged_only``: each list measured
        on its judged chunks only (trec_eval's -J). Returns an Evaluation (``summary``,
        ``levels``, ``counts``, ``per_query``, ``by_type``, ``flagged``, ``plans``)."""
        from ..measure.evaluation import evaluate_in
        from ..measure.metrics import measures_for

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
            judged_only=judged_only,
        )

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
        judged_only: bool = False,
    ) -> StageReport:
        """The stages of ``experiment`` side by side, their ceilings and the loss attribution
        (`pgeval stage-report`); ``repetition`` None means all (means and spread);
        ``judged_only``: the stages' measures on their judged chunks only (trec_eval's -J).
        Returns a StageReport; ``as_dict()`` is what ``--format json`` prints."""
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
            judged_only=judged_only,
        )

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
        test: str = "randomisation",
    ) -> Comparison:
        """Candidate against baseline (runs, experiments or saved JSON reports), query by query,
        with significance (`pgeval compare`; ``test``: "randomisation" or "t-test"); returns a
        Comparison."""
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
            test=test,
        )

    def compare_all(
        self,
        specs: list[str],
        *,
        measures: list[str] | None = None,
        rel: int = 1,
        alpha: float = 0.05,
        permutations: int = 10_000,
        seed: int = 0,
        allow_partial: bool = False,
        test: str = "randomisation",
    ) -> MultiComparison:
        """Every pair of ``specs`` (runs, experiments or saved JSON reports; two or more), with
        Holm's correction across the pairs and measures (`pgeval compare A B C ...`)."""
        from ..reporting.compare_many import compare_many_specs

        return compare_many_specs(
            self.database,
            list(specs),
            measures=measures,
            rel=rel,
            allow_partial=allow_partial,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            test=test,
        )

    def gate(
        self,
        baseline: str,
        candidate: str,
        rules: str | Path | None = None,
        *,
        rel: int = 1,
        allow_partial: bool = False,
    ) -> GateResult:
        """The release gate (`pgeval gate`): a GateResult whose ``passed`` says whether every
        applicable rule passed (nothing is raised on failure). ``rules``: a TOML file, None for
        the built-in rules."""
        from ..reporting.gate import gate

        return gate(self.database, baseline, candidate, rules, rel=rel, allow_partial=allow_partial)

    # ---- answers -------------------------------------------------------------------------------
    def import_answers(
        self, path: str | Path, run: str, *, replace: bool = False
    ) -> AnswersImported:
        """Validate a JSONL file of answers and store them for ``run``, all or nothing
        (`pgeval answers import`); returns AnswersImported (the import report and the run's
        summary; ``as_dict()``)."""
        from ..measure import answers as a

        with self.database.connect(autocommit=True) as conn:
            report = a.import_answers(conn, str(path), run, replace=replace)
            summary = a.summary(conn, a.resolve_run(conn, run).run_id)
        return AnswersImported(report, summary)

    def answers(self, run: str, *, per_query: bool = False) -> tuple[dict, list[dict] | None]:
        """(summary, rows per query or None) of ``run``'s imported answers: citation precision
        and answer accuracy (`pgeval answers show`)."""
        from ..core.db import snapshot
        from ..core.errors import NotFound
        from ..measure import answers as a

        with snapshot(self.database) as conn:
            found = a.resolve_run(conn, run)
            if not a.has_answers(conn, found.run_id):
                raise NotFound(
                    f"run '{run}' has no answers (import them with `pgeval answers "
                    "import FILE --run RUN`)"
                )
            summary = a.summary(conn, found.run_id)
            rows = a.per_query(conn, found.run_id) if per_query else None
        assert summary is not None  # the run has answers, so its test set has queries
        return summary, rows

    def refusal_phrases(
        self, *, add: Iterable[str] = (), remove: Iterable[str] = (), reset: bool = False
    ) -> tuple[list[str], bool]:
        """(phrases, whether they are the built-in defaults) that mark an answer as a refusal,
        after adding, removing or resetting (`pgeval answers refusals`)."""
        from ..measure import answers as a

        with self.database.connect(autocommit=True) as conn:
            if add or remove or reset:
                a.set_refusal_phrases(conn, add=list(add), remove=list(remove), reset=reset)
            return a.refusal_phrases(conn)


@dataclass
class AnswersImported:
    report: ImportReport  # measure.answers' import report
    summary: dict | None

    def as_dict(self) -> dict:
        """What `pgeval answers import --format json` prints."""
        return {
            "run": self.report.run,
            "file": self.report.file,
            "imported": self.report.imported,
            "replaced": self.report.replaced,
            "summary": self.summary,
            "warnings": self.report.warnings,
        }


class PlanMethods:
    database: Database

    def plans(
        self, run: str, *, capture: bool = True, refresh: bool = False
    ) -> tuple[dict | None, list[dict]]:
        """(what was captured or None, rows): the query plans of ``run``'s flagged queries,
        captured first unless ``capture=False`` (``refresh``: again) (`pgeval plans`)."""
        from ..measure import diagnostics

        done = diagnostics.capture(self.database, run, refresh=refresh) if capture else None
        return done, diagnostics.show(self.database, run)


@dataclass
class RenderedReport:
    doc: dict  # the report's data (what its JSON holds)
    text: str  # rendered in the format asked for
    out: str | None = None  # the file written, if any


class ReportMethods:
    database: Database

    def report(
        self,
        name: str,
        *,
        format: str = "json",
        out: str | Path | None = None,
        measures: list[str] | None = None,
        rel: int = 1,
        domain_discount: float = 0.0,
        depth: int | None = None,
        min_score: float | None = None,
        plots: bool = True,
        allow_partial: bool = False,
        levels: bool = False,
    ) -> RenderedReport:
        """A report of run or experiment ``name``, or a saved JSON report re-rendered
        (`pgeval report`), as ``format`` json | md | html (``plots=False``: HTML without
        plots); written atomically to ``out`` when given; ``levels``: the summary shows the
        metric contract's acceptance levels (a general-domain knowledge base's, docs/METRICS.md;
        the JSON always carries them). Returns a RenderedReport."""
        import os

        from ..core.errors import InputError, param
        from ..measure.metrics import measures_for
        from ..reporting import html, is_report_file, markdown, obtain
        from ..reporting import json as report_json

        if depth is not None and depth < 1:
            raise InputError(f"depth must be >= 1, got {depth}", field=param("depth"))
        if out is not None and is_report_file(name) and _same_file(name, os.fspath(out)):
            raise InputError(
                f"{param('out')} {out} is the report being read ({name}): writing it would "
                "overwrite the input; choose another file",
                field=param("out"),
            )
        doc = obtain(
            self.database,
            name,
            measures=measures if measures is not None else measures_for(),
            rel=rel,
            domain_discount=domain_discount,
            depth=depth,
            allow_partial=allow_partial,
            min_score=min_score,
        )
        if format == "json":
            text = report_json.dumps(doc)
        elif format == "md":
            text = markdown.render(doc, levels=levels)
        else:
            text = html.render(doc, with_plots=plots, levels=levels)
        if out is not None:
            report_json.write_text(text, os.fspath(out))
        return RenderedReport(doc, text, None if out is None else os.fspath(out))


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (links, '..', hard links included)."""
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:  # ``b`` does not exist yet: compare where it would be
        return os.path.realpath(a) == os.path.realpath(b)
