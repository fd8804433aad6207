"""The API's database-tuning methods: warm-up, health, fingerprint, diff."""

from __future__ import annotations

from typing import Any


class DbaMethods:
    database: Any

    def warmup(
        self,
        target: str,
        *,
        testset: str | None = None,
        embedder: str | None = None,
        settings=None,
        k: int | None = None,
        max_passes: int | None = None,
        tolerance: float | None = None,
        random_queries: int | None = None,
        prewarm: bool = True,
        on_pass=None,
    ):
        """Warm target ``target``'s table and ANN indexes up (`pgeval warmup`): pg_prewarm when
        installed (``prewarm=False``: never), then passes of ``testset``'s query vectors (else
        ``random_queries`` seeded random ones) until the median latency settles within
        ``tolerance`` or ``max_passes``; ``on_pass(PassStats)`` after each. What is None takes
        ``evaluator.dba.warmup_target.WARMUP_DEFAULTS``. Returns a WarmupReport
        (``as_dict()``)."""
        from ..dba.warmup_target import WARMUP_DEFAULTS as D
        from ..dba.warmup_target import warmup_target

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
        )

    def health(self, target: str, *, testset: str | None = None, embedder: str | None = None):
        """The health checks of target ``target`` (`pgeval health`): a list of Findings
        (``check``, ``status`` ok|hint|warning|error, ``count``, ``detail``, ``examples``)."""
        from ..dba.health_target import check_target

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
        settings=None,
        checksum: bool = True,
        check: bool = False,
    ):
        """The configuration fingerprint of ``target`` captured now, or the one stored with
        ``run`` (`pgeval fingerprint`); ``check``: with the target's health findings. Returns a
        FingerprintReport (``config_hash``, ``fingerprint``, ``health``; ``as_dict()``)."""
        from ..dba.fingerprint_report import fingerprint_of

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

    def diff(self, a: str, b: str):
        """What differs between the configurations of runs (or experiments) ``a`` and ``b``
        (`pgeval diff`): a Diff (``variables``, ``rows()``, ``warnings()``; ``as_dict()``)."""
        from ..core.db import snapshot
        from ..dba.config_diff import diff_runs

        with snapshot(self.database) as conn:
            return diff_runs(conn, a, b)
