"""The API's database-tuning methods: warm-up, health, fingerprint, diff."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tuning.advise.config import ADVISE_DEFAULTS
from ..tuning.watch.config import WATCH_DEFAULTS

if TYPE_CHECKING:
    from ..core.db import Database
    from ..table.config_diff import Diff
    from ..table.fingerprint_report import FingerprintReport
    from ..table.health import Finding
    from ..table.warmup import PassStats, WarmupReport
    from ..tuning.advise import AdviseResult
    from ..tuning.advise.plan import Design
    from ..tuning.watch import ProbeResult

# settings by name: {"hnsw.ef_search": 40} or ["hnsw.ef_search=40"]
Settings = Mapping[str, object] | Iterable[str]


class DbaMethods:
    database: Database

    def warmup(
        self,
        target: str,
        *,
        testset: str | None = None,
        embedder: str | None = None,
        settings: Settings | None = None,
        k: int | None = None,
        max_passes: int | None = None,
        tolerance: float | None = None,
        random_queries: int | None = None,
        prewarm: bool = True,
        on_pass: Callable[[PassStats], None] | None = None,
        index: str | None = None,
    ) -> WarmupReport:
        """Warm target ``target``'s table and ANN indexes up (`pgeval warmup`): pg_prewarm when
        installed (``prewarm=False``: never), then, for each ANN index of the vector column (or
        ``index`` alone), through its stage kind's statement, passes of ``testset``'s query vectors (else
        ``random_queries`` seeded random ones) until the median latency settles within
        ``tolerance`` or ``max_passes``; ``on_pass(PassStats)`` after each. What is None takes
        ``evaluator.table.warmup_target.WARMUP_DEFAULTS``. Returns a WarmupReport
        (``as_dict()``)."""
        from ..table.warmup_target import WARMUP_DEFAULTS as D
        from ..table.warmup_target import warmup_target

        return warmup_target(
            self.database,
            target,
            testset=testset,
            embedder=embedder,
            settings=settings,
            k=D.k if k is None else k,
            max_passes=D.max_passes if max_passes is None else max_passes,
            tolerance=D.tolerance if tolerance is None else tolerance,
            random_queries=D.random_queries if random_queries is None else random_queries,
            use_prewarm=prewarm,
            on_pass=on_pass,
            index=index,
        )

    def health(
        self, target: str, *, testset: str | None = None, embedder: str | None = None
    ) -> list[Finding]:
        """The health checks of target ``target`` (`pgeval health`): a list of Findings
        (``check``, ``status`` ok|hint|warning|error, ``count``, ``detail``, ``examples``)."""
        from ..table.health_target import check_target

        return check_target(self.database, target, testset=testset, embedder=embedder)

    def fingerprint(
        self,
        target: str | None = None,
        *,
        run: str | None = None,
        testset: str | None = None,
        embedder: str | None = None,
        stage: str | None = None,
        chunking: str | None = None,
        settings: Settings | None = None,
        checksum: bool = True,
        check: bool = False,
    ) -> FingerprintReport:
        """The configuration fingerprint of ``target`` captured now, or the one stored with
        ``run`` (`pgeval fingerprint`); ``check``: with the target's health findings. Returns a
        FingerprintReport (``config_hash``, ``fingerprint``, ``health``; ``as_dict()``)."""
        from ..table.fingerprint_report import fingerprint_of

        return fingerprint_of(
            self.database,
            target=target,
            run=run,
            testset=testset,
            embedder=embedder,
            settings=settings,
            stage=stage,
            checksum=checksum,
            chunking=chunking,
            check=check,
        )

    def diff(self, a: str, b: str) -> Diff:
        """What differs between the configurations of runs (or experiments) ``a`` and ``b``
        (`pgeval diff`): a Diff (``variables``, ``rows()``, ``warnings()``; ``as_dict()``)."""
        from ..core.db import snapshot
        from ..table.config_diff import diff_runs

        with snapshot(self.database) as conn:
            return diff_runs(conn, a, b)

    def advise(
        self,
        target: str,
        testset: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        captured: str | None = None,
        window: str | None = None,
        target_recall: float = ADVISE_DEFAULTS.target_recall,
        designs: Any = None,
        build: Any = None,
        settings: Any = None,
        max_p95_ms: float | None = ADVISE_DEFAULTS.max_p95_ms,
        max_index_mb: float | None = ADVISE_DEFAULTS.max_index_mb,
        max_build_s: float | None = ADVISE_DEFAULTS.max_build_s,
        concurrency: int = ADVISE_DEFAULTS.concurrency,
        k: int = ADVISE_DEFAULTS.k,
        repeat: int = ADVISE_DEFAULTS.repeat,
        final_rounds: int = ADVISE_DEFAULTS.final_rounds,
        find_max: int | None = ADVISE_DEFAULTS.find_max,
        embedder: str | None = ADVISE_DEFAULTS.embedder,
        checksum: bool = ADVISE_DEFAULTS.checksum,
        statement_timeout: str | None = ADVISE_DEFAULTS.statement_timeout,
        maintenance_work_mem: str | None = ADVISE_DEFAULTS.maintenance_work_mem,
        build_timeout: float = ADVISE_DEFAULTS.build_timeout_s,
        fresh: bool = ADVISE_DEFAULTS.fresh,
        group_by: str | None = ADVISE_DEFAULTS.group_by,
        max_groups: int = ADVISE_DEFAULTS.max_groups,
        group_queries: int | None = ADVISE_DEFAULTS.group_queries,
        sample_rows: int | None = ADVISE_DEFAULTS.sample_rows,
        confirm_on_table: bool = ADVISE_DEFAULTS.confirm_on_table,
        max_confirm_s: float | None = ADVISE_DEFAULTS.max_confirm_s,
        role: str | None = ADVISE_DEFAULTS.role,
        low_end: bool = ADVISE_DEFAULTS.low_end,
        plot: str | Path | None = None,
        report: str | Path | None = None,
        on_design: Callable[[int, int, Design, float | None], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        on_designed: Callable[[int, int, Design, Mapping[str, Any]], None] | None = None,
    ) -> AdviseResult:
        """Which index design to have, built how, queried how (`pgeval advise`; docs/advise.md):
        per design x build (``designs``, ``build``: ``["hnsw:m=8,16"]``) the cheapest setting
        reaching ``target_recall``, the recommendation within the budgets with its DDL and
        settings SQL; ``plot`` (PNG), ``report`` (HTML). ``group_by``: per group (``max_groups``,
        ``group_queries`` each, default ``sample_queries`` spread over them). ``sample_rows``:
        screened on that many rows, the table's own design in place, at most one other built in
        full within ``max_confirm_s`` (``confirm_on_table``: on the table). ``role``: ALTER ROLE.
        ``low_end``: the setting interval's upper end. ``on_design(i, n, design, left)`` before
        each design, ``on_designed(i, n, design, row)`` after it. Returns an AdviseResult
        (``as_dict()``: ``--format json``); defaults: ``ADVISE_DEFAULTS``."""
        keywords = dict(locals())  # as given (config_of reads those named as fields)
        from ..stages import gucs
        from ..tuning.advise import AdviseConfig, run_advise
        from ..tuning.sweep.configure import grid_items
        from ._keywords import config_of, query_source

        cfg = config_of(
            AdviseConfig,
            keywords,
            testset=testset or "",
            queries=query_source(
                testset, sample_queries, seed, queries_sql, queries_file, captured, window
            ),
            designs=tuple([designs] if isinstance(designs, str) else designs or ()),
            build=grid_items(build),
            settings=gucs.parse(gucs.settings_items(settings)),
            build_timeout_s=build_timeout,
        )
        result = run_advise(
            self.database, cfg, on_design=on_design, on_warning=on_warning, on_designed=on_designed
        )
        _write_advice(result, plot, report)
        return result

    def watch(
        self,
        target: str,
        stage: str,
        testset: str | None = None,
        *,
        sample_queries: int | None = None,
        seed: int | None = None,
        queries_sql: str | None = None,
        queries_file: str | Path | None = None,
        captured: str | None = None,
        window: str | None = None,
        settings: Any = None,
        k: int = WATCH_DEFAULTS.k,
        min_recall: float | None = WATCH_DEFAULTS.min_recall,
        max_drop: float | None = WATCH_DEFAULTS.max_drop,
        max_p95_ms: float | None = WATCH_DEFAULTS.max_p95_ms,
        index: str | None = WATCH_DEFAULTS.index,
        statement_timeout: str | None = WATCH_DEFAULTS.statement_timeout,
        remedy: bool = WATCH_DEFAULTS.remedy,
        remedy_max: int | None = WATCH_DEFAULTS.remedy_max,
        group_by: str | None = WATCH_DEFAULTS.group_by,
        max_groups: int = WATCH_DEFAULTS.max_groups,
        group_queries: int | None = WATCH_DEFAULTS.group_queries,
        on_warning: Callable[[str], None] | None = None,
    ) -> list[ProbeResult]:
        """One probe of ``target``'s ``stage`` at its production setting (`pgeval watch`):
        recall@``k`` against exact search on a stable sample (``sample_queries``, 100 when no
        query source is given), p50/p95, rows, the index's build identity, stored in
        pgeval.probe; the bounds crossed named. One ProbeResult per group with ``group_by``
        (the sample spread over the groups, or ``group_queries`` each; ``crossed``, ``alerts``,
        ``advice``, ``remedy``, ``plan``: the planner's plan a group's probe measured, ``probe``:
        its probe_history row). Every group is probed; when one fails, none is recorded:
        :class:`~evaluator.core.errors.GroupsFailed` carries the probes measured (``results``) and
        the groups that failed (``failures``)."""
        keywords = dict(locals())  # as given (config_of reads those named as fields)
        from ..stages import gucs
        from ..tuning.watch import WatchConfig, run_probes
        from ..tuning.watch.probe import DEFAULT_SAMPLE
        from ._keywords import config_of, query_source

        given = (testset, sample_queries, queries_sql, queries_file, captured)
        if not any(v is not None for v in given):
            sample_queries = DEFAULT_SAMPLE
        cfg = config_of(
            WatchConfig,
            keywords,
            queries=query_source(
                testset, sample_queries, seed, queries_sql, queries_file, captured, window
            ),
            testset=testset or "",
            settings=gucs.parse(gucs.settings_items(settings)),
        )
        return run_probes(self.database, cfg, on_warning=on_warning)


def _write_advice(result: AdviseResult, plot: str | Path | None, report: str | Path | None) -> None:
    """advise's PNG (``plot``) and HTML page (``report``), where asked for."""
    if plot is not None:
        from ..tuning.advise import plot as plotmod

        plotmod.write(plot, result.as_dict())
    if report is not None:
        from ..tuning.advise import report as reportmod

        reportmod.write(report, result.as_dict())
