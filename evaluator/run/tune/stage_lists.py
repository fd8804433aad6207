"""The stage `pgeval tune` tunes, read from its stored run: its kind, inputs and own options, and
the SQL that gives its ranked lists under other options from the stored input lists (a merge:
``pgeval.fuse_rrf`` / ``pgeval.fuse_scores``, as the merge stage calls them; a rerank:
``pgeval.rerank_top_n``, the scores the reranker gave). No earlier stage is searched again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InputError, NotFound
from ...stages.merge import FUSE_RRF, FUSE_SCORES


@dataclass(frozen=True)
class StageLists:
    experiment: str
    stage: str
    kind: str  # merge | rerank
    run_id: int
    run_name: str
    testset_id: int
    repetition: int
    inputs: list[str] = field(default_factory=list)  # merge: the fused stages, in order
    input_runs: list[int] = field(default_factory=list)
    current: dict[str, Any] = field(default_factory=dict)  # the run's own options

    def source(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(a FROM item ``f`` with query_id, rank, chunk_id, score; its bound values)."""
        if self.kind == "rerank":
            return "pgeval.rerank_top_n(%(run)s, %(top_n)s) f", {
                "run": self.run_id,
                "top_n": options["top_n"],
            }
        depths = list(options["input_depth"])
        return FUSE_RRF if options["method"] == "rrf" else FUSE_SCORES, {
            "runs": self.input_runs,
            "w": list(options["weights"]),
            "k": options["k"] if options["k"] is not None else 60.0,
            "method": options["method"],
            "depth": options["depth"],
            "input_depths": None if all(d is None for d in depths) else depths,
        }

    def as_opts(self, options: dict[str, Any]) -> list[str]:
        """``--opt STAGE:KEY=VALUE`` of `run pipeline` that make the stage rank as ``options``."""
        out = []
        for key, value in options.items():
            if value is None or (key == "input_depth" and all(v is None for v in value)):
                continue
            if isinstance(value, tuple):
                value = ",".join(f"{n}:{v:g}" for n, v in zip(self.inputs, value) if v is not None)
            elif isinstance(value, float):
                value = f"{value:g}"
            out.append(f"{self.stage}:{key}={value}")
        return out


def _merge_options(params: dict, depth: int) -> dict[str, Any]:
    names = params["inputs"]
    weights = params.get("weights") or {}
    input_depth = params.get("input_depth") or {}
    method = params.get("method", "rrf")
    return {
        "method": method,
        "k": float(params.get("k", 60.0)) if method == "rrf" else None,
        "weights": tuple(float(weights.get(n, 1.0)) for n in names),
        "input_depth": tuple(input_depth.get(n) for n in names),
        "depth": depth,
    }


def read(conn: Any, experiment: str, stage: str, repetition: int = 1) -> StageLists:
    """The run of ``stage`` in ``experiment`` at ``repetition``; NotFound or InputError when
    there is none or it cannot be tuned."""
    row = conn.execute(
        "SELECT r.run_id, r.name, r.testset_id, r.params, r.depth, r.status, "
        "array(SELECT DISTINCT x.stage FROM pgeval.run x WHERE x.experiment_id = e.experiment_id) "
        "FROM pgeval.experiment e LEFT JOIN pgeval.run r ON r.experiment_id = e.experiment_id "
        "AND r.stage = %s AND r.repetition = %s WHERE e.name = %s",
        (stage, repetition, experiment),
    ).fetchone()
    if row is None:
        raise NotFound(f"no experiment named '{experiment}' (see `pgeval run list`)")
    run_id, name, testset_id, params, depth, status, stages = row
    if run_id is None:
        raise InputError(
            f"experiment '{experiment}' has no stage '{stage}' at repetition {repetition} "
            f"(its stages: {', '.join(sorted(stages)) or 'none'})",
            field="--stage",
        )
    kind = params.get("kind")
    if kind not in ("merge", "rerank"):
        raise InputError(
            f"stage '{stage}' of '{experiment}' is a {kind} stage: tune tunes a merge or a rerank",
            field="--stage",
        )
    if status != "complete":
        raise InputError(f"run '{name}' is {status}: tune reads complete runs", field="--stage")
    if kind == "rerank":
        return StageLists(
            experiment, stage, kind, run_id, name, testset_id, repetition,
            [params["input"]], [params["input_run"]], {"top_n": int(params["top_n"])},
        )  # fmt: skip
    return StageLists(
        experiment, stage, kind, run_id, name, testset_id, repetition,
        list(params["inputs"]), list(params["input_runs"]), _merge_options(params, depth),
    )  # fmt: skip
