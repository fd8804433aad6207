"""``import``: a ranked list produced elsewhere (a live RAG service's output, a TREC run) attached
to an experiment as a stage. Options: ``import:file=PATH`` (required), ``import:format=trec|jsonl``
(default: by extension), ``import:score=distance|similarity`` (default: the file's, as `pgeval run
import --score` reads it; stored in the run's params). The file is read by the pipeline's run-file reader, ``ctx.import_run``
(:func:`evaluator.run.runs.import_run`: the same validation as `pgeval run import`) once per
repetition, then linked to the experiment."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError, PgevalError, param
from .base import BOUNDARY_NONE, SCORE_SIMILARITY, BaseStage, StageContext


class ImportStage(BaseStage):
    kind = "import"
    score = SCORE_SIMILARITY
    options = frozenset({"file", "format", "score"})

    def prepare(self, ctx: StageContext) -> None:
        path = ctx.option("file")
        if not path:
            raise InputError(
                f"stage {ctx.stage} needs {param('options')} {ctx.stage}:file=PATH",
                field=param("options"),
            )
        if not Path(path).is_file():
            raise InputError(f"no such file: {path}", field=param("options"))
        fmt = ctx.option("format")
        if fmt not in (None, "trec", "jsonl"):
            raise InputError(f"{ctx.stage}:format must be trec or jsonl", field=param("options"))
        if ctx.option("score") not in (None, "distance", "similarity"):
            raise InputError(
                f"{ctx.stage}:score must be distance or similarity", field=param("options")
            )

    def run(self, ctx: StageContext, run_name: str) -> int:
        if ctx.import_run is None:
            raise PgevalError(f"stage {ctx.stage} runs in a pipeline (no run-file reader given)")
        results = ctx.results
        if results.info.transaction_status != 0:
            results.rollback()
        rep = ctx.import_run(
            results,
            ctx.option("file"),
            ctx.testset,
            run_name,
            ctx.option("format"),
            score=ctx.option("score"),
        )
        results.execute(
            "UPDATE pgeval.run SET experiment_id = %s, stage = %s, repetition = %s, depth = %s, "
            "timing_boundary = %s, config_hash = %s, params = params || %s::jsonb "
            "WHERE run_id = %s",
            (
                ctx.experiment_id,
                ctx.stage,
                ctx.repetition,
                None,
                BOUNDARY_NONE,
                ctx.extra.get("config_hash"),
                '{"kind": "import"}',
                rep.run_id,
            ),
        )
        results.commit()
        if rep.unknown_queries:
            ctx.warn(
                f"stage {ctx.stage}: {rep.unknown_queries} query ids of "
                f"{ctx.option('file')} are not in the test set (skipped)"
            )
        if ctx.progress:
            ctx.progress.start(ctx.stage, 1)
            ctx.progress.advance()
        return rep.run_id
