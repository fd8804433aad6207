"""Builders for experiments made directly in SQL (no pipeline): an experiment row and its stage
runs named ``{experiment}.{stage}.{repetition}`` with depth, params and repetition set."""

from __future__ import annotations

import json

from helpers import make_run

DISTANCE = {"score": "distance", "metric": "cosine"}
SIMILARITY = {"score": "similarity"}


def make_experiment(conn, name: str, testset: str, stages: list[str] | None = None) -> int:
    config = {"stages": stages} if stages is not None else {}
    return conn.execute(
        "INSERT INTO pgeval.experiment (name, testset_id, config, status) "
        "SELECT %s, testset_id, %s, 'complete' FROM pgeval.testset WHERE name = %s "
        "RETURNING experiment_id", (name, json.dumps(config), testset)).fetchone()[0]


def stage_run(conn, experiment: str, stage: str, ranked: dict, *, testset: str,
              repetition: int = 1, depth: int | None = None, params: dict | None = None,
              latency_ms: dict | None = None) -> int:
    """A run of ``experiment`` (created with :func:`make_experiment`). ``ranked`` as in
    helpers.make_run: {query_id: [chunk_id, ...]} or {query_id: [(chunk_id, score), ...]}."""
    exp_id = conn.execute("SELECT experiment_id FROM pgeval.experiment WHERE name = %s",
                          (experiment,)).fetchone()[0]
    if params is None:
        params = DISTANCE if stage in ("exact", "hnsw", "ivfflat", "diskann") else SIMILARITY
    rid = make_run(conn, f"{experiment}.{stage}.{repetition}", testset, ranked, stage=stage,
                   experiment_id=exp_id, latency_ms=latency_ms)
    conn.execute("UPDATE pgeval.run SET repetition = %s, depth = %s, params = %s WHERE run_id = %s",
                 (repetition, depth, json.dumps(params), rid))
    return rid


def dist(chunks: list[str], start: float = 0.1, step: float = 0.1) -> list[tuple[str, float]]:
    """[(chunk, distance)] with increasing distances, for vector stages."""
    return [(c, round(start + i * step, 6)) for i, c in enumerate(chunks)]
