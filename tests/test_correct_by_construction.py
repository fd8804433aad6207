"""Issue 48, "correct by construction", on the real server: a run's score direction survives an
export and import (a distance run fuses after a JSONL round trip exactly as in the pipeline; a TREC
export's -rank scores are marked as ranks and refused by score fusion); unknown ``--opt`` keys are
refused from each stage's declared options; a merge's latency is its pipeline's end to end, so
the p95 gate applies; `run delete --experiment`; `compare` of more than two runs with Holm's
correction (checked against a hand implementation), W/T/L and the in-sample note."""

from __future__ import annotations

import io
import json
import math
import os
import re
import socket
from pathlib import Path

import numpy as np
import psycopg
import pytest
from helpers import make_run, make_testset
from helpers_stage import make_experiment, prepare_and_run, stage_ctx, stage_run, stored

from evaluator.core.errors import Conflict, InputError
from evaluator.kinds import registry
from evaluator.reporting import compare_many
from evaluator.reporting import json as report_json
from evaluator.run.runs import delete_experiment, export_run, import_run
from evaluator.stages.merge import MergeStage

N = 30
QRELS = {f"q{i}": {f"c{i}": 2, f"d{i}": 1} for i in range(N)}
POOL = [f"c{i}" for i in range(N)] + [f"d{i}" for i in range(N)] + [f"x{i}" for i in range(20)]


def _lists(seed: int, descending: bool) -> dict:
    """Per query 8 chunks with scores: distances rising (hnsw) or similarities falling (bm25)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(N):
        others = [c for c in POOL if c != f"c{i}"]
        chunks = [str(c) for c in rng.choice(others, 7, replace=False)]
        if rng.random() < 0.6:  # the relevant chunk somewhere in the list
            chunks.insert(int(rng.integers(0, 8)), f"c{i}")
        values = sorted(np.round(rng.uniform(0.05, 2.0, len(chunks)), 6), reverse=descending)
        out[f"q{i}"] = [(c, float(v)) for c, v in zip(chunks, values, strict=True)]
    return out


def _experiment(conn, name: str, slow: float = 1.0) -> dict:
    make_experiment(conn, name, "cbc", ["hnsw", "bm25", "merge"])
    lat_h = {f"q{i}": 2.0 + (i * 7) % 11 for i in range(N)}
    lat_b = {f"q{i}": slow * (1.0 + (i * 5) % 13) for i in range(N)}
    runs = {
        "hnsw": stage_run(
            conn, name, "hnsw", _lists(1, False), testset="cbc", depth=8, latency_ms=lat_h
        ),
        "bm25": stage_run(
            conn, name, "bm25", _lists(2, True), testset="cbc", depth=8, latency_ms=lat_b
        ),
    }
    return {"runs": runs, "latency": (lat_h, lat_b)}


@pytest.fixture
def exp(clean, conn):
    make_testset(conn, "cbc", QRELS)
    return _experiment(conn, "cx")


def _merge(database, conn, experiment: str, previous: dict, options: dict) -> int:
    ctx = stage_ctx(
        database,
        conn,
        testset="cbc",
        experiment=experiment,
        stage="merge",
        depth=10,
        options=options,
        previous=previous,
    )
    return prepare_and_run(MergeStage(), ctx, f"{experiment}.merge.1")


def _export(conn, name: str, fmt: str, path: Path, notes: list | None = None) -> Path:
    out = io.StringIO()
    export_run(conn, name, fmt, out, None if notes is None else notes.append)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fused(conn, fn: str, runs: list[int], *args) -> list:
    return conn.execute(
        f"SELECT query_id, rank, chunk_id, score FROM pgeval.{fn} ORDER BY 1, 2", (runs, *args)
    ).fetchall()


# ---- score direction ----------------------------------------------------------------------------


def test_jsonl_round_trip_of_a_distance_run_fuses_as_the_pipeline(database, conn, exp, tmp_path):
    merged = _merge(database, conn, "cx", exp["runs"], {"method": "minmax"})
    files = {s: _export(conn, f"cx.{s}.1", "jsonl", tmp_path / f"{s}.jsonl") for s in exp["runs"]}
    first = json.loads(files["hnsw"].read_text().splitlines()[0])
    assert first["score"] == "distance"  # the export says which way the scores point
    back = {s: import_run(conn, f, "cbc", f"rt-{s}").run_id for s, f in files.items()}
    ids = [back["hnsw"], back["bm25"]]
    # the round trip fuses to the pipeline's lists: chunk, rank and score, to the last digit
    pipeline = [(q, c, s) for q, pairs in stored(conn, merged).items() for c, s in pairs]
    again = [(q, c, s) for q, _, c, s in _fused(conn, "fuse_scores(%s, NULL, 'minmax', 10)", ids)]
    assert again == pipeline
    originals = [exp["runs"]["hnsw"], exp["runs"]["bm25"]]
    for method in ("minmax", "zscore"):
        assert _fused(conn, "fuse_scores(%s, NULL, %s)", ids, method) == _fused(
            conn, "fuse_scores(%s, NULL, %s)", originals, method
        )
    # what the round trip used to store (a similarity): another, wrong fusion; the test can fail
    conn.execute(
        'UPDATE pgeval.run SET params = params || \'{"score": "similarity"}\' WHERE run_id = %s',
        (back["hnsw"],),
    )
    assert _fused(conn, "fuse_scores(%s, NULL, 'minmax', 10)", ids) != _fused(
        conn, "fuse_scores(%s, NULL, 'minmax', 10)", originals
    )


def test_direction_given_inferred_or_unknown(conn, exp, tmp_path):
    lines = _export(conn, "cx.hnsw.1", "jsonl", tmp_path / "h.jsonl").read_text().splitlines()
    bare = [json.dumps({k: v for k, v in json.loads(x).items() if k != "score"}) for x in lines]
    (tmp_path / "bare.jsonl").write_text("\n".join(bare) + "\n")
    assert import_run(conn, tmp_path / "bare.jsonl", "cbc", "b1").score == "distance"  # rising
    rep = import_run(conn, tmp_path / "bare.jsonl", "cbc", "b2", score="distance")
    assert rep.score == "distance"
    params = conn.execute("SELECT params FROM pgeval.run WHERE run_id = %s", (rep.run_id,))
    assert params.fetchone()[0]["score"] == "distance"
    with pytest.raises(InputError, match="rise down this list, yet they are similarity"):
        import_run(conn, tmp_path / "bare.jsonl", "cbc", "b3", score="similarity")
    # one list rising, one falling, nothing said: unknown, and score fusion refuses it
    mixed = [
        bare[0],
        json.dumps(
            {
                "query_id": "q1",
                "ranked": [{"chunk_id": "a", "score": 2}, {"chunk_id": "b", "score": 1}],
            }
        ),
    ]
    (tmp_path / "mixed.jsonl").write_text("\n".join(mixed) + "\n")
    rep = import_run(conn, tmp_path / "mixed.jsonl", "cbc", "mixed")
    assert rep.score is None
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="direction is unknown"):
        _fused(conn, "fuse_scores(%s, NULL, 'minmax')", [rep.run_id, exp["runs"]["bm25"]])
    conn.rollback()
    assert _fused(conn, "fuse_rrf(%s)", [rep.run_id, exp["runs"]["bm25"]])  # rrf reads ranks


def test_trec_export_of_ranks_is_said_and_marked(pgeval, conn, exp, tmp_path):
    notes: list[str] = []
    f = _export(conn, "cx.hnsw.1", "trec", tmp_path / "h.trec", notes)
    assert len(notes) == 1 and "written as -rank" in notes[0]
    first = f.read_text().splitlines()[0].split()
    assert float(first[4]) == -int(first[3])  # the score is minus the rank
    rep = import_run(conn, f, "cbc", "trec-h")
    assert rep.score == "rank"
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="its scores are ranks"):
        _fused(conn, "fuse_scores(%s, NULL, 'zscore')", [rep.run_id, exp["runs"]["bm25"]])
    conn.rollback()
    # rrf reads ranks only: the TREC copy fuses as the original
    assert _fused(conn, "fuse_rrf(%s)", [rep.run_id, exp["runs"]["bm25"]]) == _fused(
        conn, "fuse_rrf(%s)", [exp["runs"]["hnsw"], exp["runs"]["bm25"]]
    )
    # a TREC file of real scores is a similarity run, and exports without a note
    g = tmp_path / "sim.trec"
    g.write_text("q1 Q0 a 1 2.5 t\nq1 Q0 b 2 1.5 t\n")
    assert import_run(conn, g, "cbc", "trec-sim").score == "similarity"
    notes.clear()
    _export(conn, "trec-sim", "trec", tmp_path / "sim2.trec", notes)
    assert notes == []
    # the ranks stay ranks through a JSONL copy; the command line says so on stderr
    lines = _export(conn, "trec-h", "jsonl", tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["score"] == "rank"
    code, out, err = pgeval("run", "export", "cx.bm25.1", "--format", "trec")
    assert code == 0 and "written as -rank" in _one_line(err) and "-rank" not in out
    code, out, err = pgeval("run", "import", str(f), "--testset", "cbc", "--name", "t2")
    assert code == 0 and "scores: ranks" in out


# ---- unknown --opt keys -------------------------------------------------------------------------


def test_unknown_option_is_refused_with_the_stage_s_keys():
    from evaluator.run.configure import pipeline_config

    with pytest.raises(InputError) as exc:
        pipeline_config(testset="t", stages="exact,hnsw,merge", options=["merge:bogus=1"])
    known = ", ".join(sorted(MergeStage.options))
    assert str(exc.value).endswith(f"unknown option merge:bogus (known: {known})")
    cfg = pipeline_config(testset="t", stages="hnsw,m2=merge", options=["m2:k=30", "hnsw:index=i"])
    assert cfg.options == {"m2": {"k": "30"}, "hnsw": {"index": "i"}}
    with pytest.raises(InputError, match="would write the API key"):  # a service's own message
        pipeline_config(testset="t", stages="service", options=["service:api_key=x"])


_READS = re.compile(r"""(?:option|options\.get)\(\s*["']([a-z_]+)["']""")
_SHARED = {  # modules a runner reads options through
    "vector_common.py": ("refetch.py",),
    "bm25.py": ("refetch.py",),
    "exact.py": ("../ground_truth/exact_stage.py",),
    "service.py": ("service_config.py",),
}


def test_every_option_a_stage_reads_is_declared():
    """The declared keys are the keys read: one place, so a new option is one more key."""
    import inspect

    for kind in registry.kinds():
        cls = type(registry.get(kind))
        read: set[str] = set()
        for base in cls.__mro__[:-1]:  # not object
            src = inspect.getsourcefile(base)
            if not src or "evaluator" not in src:
                continue
            path = Path(src)
            for p in (path, *(path.parent / x for x in _SHARED.get(path.name, ()))):
                read |= set(_READS.findall(p.read_text(encoding="utf-8")))
        assert read <= cls.options, (kind, sorted(read - cls.options))


# ---- a merge's latency --------------------------------------------------------------------------


def _nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered))) - 1]


def test_merge_latency_is_the_pipeline_s_end_to_end(database, conn, pgeval, exp, tmp_path):
    merged = _merge(database, conn, "cx", exp["runs"], {})
    lat_h, lat_b = exp["latency"]
    sums = [lat_h[q] + lat_b[q] for q in lat_h]
    got = dict(
        conn.execute(
            "SELECT percentile, latency_ms FROM pgeval.run_latency(%s, '{0.5,0.95}')", (merged,)
        ).fetchall()
    )
    assert got == {0.5: _nearest_rank(sums, 0.5), 0.95: _nearest_rank(sums, 0.95)}
    doc = report_json.build(conn, "cx.merge.1")
    assert doc["summary"]["latency_p95_ms"] == _nearest_rank(sums, 0.95)
    assert doc["latency"]["retrieval"]["end_to_end_of"] == ["hnsw", "bm25"]
    assert any("end to end" in w for w in doc["warnings"])
    code, out, err = pgeval("report", "cx.merge.1", "--format", "md")
    assert code == 0 and "retrieval (end to end: hnsw + bm25)" in out, err
    case = next(c for c in doc["cases"] if c["query_id"] == "q3")
    assert case["latency_ms"] == lat_h["q3"] + lat_b["q3"]
    # the p95 gate applies: the same lists with a slower keyword path fail it
    slow = _experiment(conn, "cy", slow=3.0)
    _merge(database, conn, "cy", slow["runs"], {})
    code, out, err = pgeval("gate", "--baseline", "cx.merge.1", "--candidate", "cy.merge.1")
    assert code == 2 and "latency_p95_ms grew by" in out, out + err
    code, out, err = pgeval("gate", "--baseline", "cx.merge.1", "--candidate", "cx.merge.1")
    assert code == 0 and "neither side has latency_p95_ms" not in out, out + err
    # an input without timings (an imported file): no latency, as before
    f = _export(conn, "cx.bm25.1", "jsonl", tmp_path / "b.jsonl")
    imported = import_run(conn, f, "cbc", "imp-b").run_id
    conn.execute(
        "UPDATE pgeval.run SET params = params || jsonb_build_object('input_runs', %s::jsonb) "
        "WHERE run_id = %s",
        (json.dumps([exp["runs"]["hnsw"], imported]), merged),
    )
    n = conn.execute("SELECT max(n) FROM pgeval.run_latency(%s)", (merged,)).fetchone()[0]
    assert n == 0


# ---- run delete --experiment --------------------------------------------------------------------


def test_delete_an_experiment_and_its_runs(pgeval, conn, exp):
    make_run(conn, "keep", "cbc", {"q1": ["c1"]})
    code, out, err = pgeval("run", "delete", "--experiment", "cx", "--format", "json")
    assert code == 0, err
    gone = json.loads(out)
    assert gone["experiment"] == "cx" and sorted(gone["runs"]) == ["cx.bm25.1", "cx.hnsw.1"]
    left = conn.execute("SELECT name FROM pgeval.run ORDER BY name").fetchall()
    assert left == [("keep",)]
    assert (
        conn.execute("SELECT count(*) FROM pgeval.experiment WHERE name = 'cx'").fetchone()[0] == 0
    )
    code, out, err = pgeval("run", "delete", "--experiment", "cx")
    assert (
        code == 1 and err.strip() == "pgeval: error: field '--experiment': no experiment named 'cx'"
    )
    code, _, err = pgeval("run", "delete", "keep", "--experiment", "cx")
    assert code != 0 and "give a run NAME or --experiment NAME (one of them)" in err


def test_delete_refuses_an_experiment_being_written(conn, exp):
    conn.execute(
        "UPDATE pgeval.run SET status = 'running', pid = %s, host = %s WHERE run_id = %s",
        (os.getpid(), socket.gethostname(), exp["runs"]["bm25"]),
    )
    conn.commit()
    with pytest.raises(Conflict, match="cx.bm25.1' of experiment 'cx' is being written"):
        delete_experiment(conn, "cx")
    assert conn.execute("SELECT count(*) FROM pgeval.run").fetchone()[0] == 2


# ---- compare of more than two runs --------------------------------------------------------------


def _holm_by_hand(p: list[float]) -> list[float]:
    """Holm's adjusted p-values from the definition: for the i-th smallest, the largest of
    min(1, (m - j + 1) p_(j)) over j <= i."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = [min(1.0, (m - j) * p[order[j]]) for j in range(m)]
    adjusted = np.maximum.accumulate(scaled)
    out = [0.0] * m
    for j, i in enumerate(order):
        out[i] = float(adjusted[j])
    return out


@pytest.fixture
def four(clean, conn):
    qrels = {f"q{i}": {f"c{i}": 2, f"d{i}": 1} for i in range(40)}
    make_testset(conn, "m4", qrels)
    good = {f"q{i}": [f"c{i}", f"d{i}", "x", "y"] for i in range(40)}
    make_run(conn, "good", "m4", good, latency_ms={q: 10.0 for q in good})
    make_run(
        conn,
        "reordered",
        "m4",
        {q: ["x", "y", *r[:2]] if i < 30 else r for i, (q, r) in enumerate(good.items())},
    )
    make_run(
        conn,
        "lost",
        "m4",
        {q: ["x", "y"] if i < 30 else r for i, (q, r) in enumerate(good.items())},
    )
    make_run(conn, "slightly", "m4", dict(good, q0=["x", "c0", "d0"]), params={"tuned": True})
    return conn


def test_compare_many_holm_wtl_and_in_sample(four, pgeval):
    names = ["good", "reordered", "lost", "slightly"]
    sides = [report_json.build(four, n) for n in names]
    c = compare_many.compare_many(sides, permutations=2000)
    assert [(p["baseline"], p["candidate"]) for p in c.pairs] == [
        (a, b) for i, a in enumerate(names) for b in names[i + 1 :]
    ]
    rows = [r for p in c.pairs for r in p["rows"] if r["p_value"] is not None]
    assert c.tests == len(rows) and len(rows) >= 6 * 3
    hand = _holm_by_hand([r["p_value"] for r in rows])
    assert [r["p_holm"] for r in rows] == pytest.approx(hand, abs=1e-12)
    assert all(r["significant"] == (r["p_holm"] < 0.05) for r in rows)
    # W/T/L per pair and measure: lost against good loses recall@10 on the 30 queries it emptied
    pair = next(p for p in c.pairs if (p["baseline"], p["candidate"]) == ("good", "lost"))
    recall = next(r for r in pair["rows"] if r["metric"] == "recall@10")
    assert (recall["wins"], recall["ties"], recall["losses"]) == (0, 10, 30)
    assert recall["significant"]
    one = next(p for p in c.pairs if (p["baseline"], p["candidate"]) == ("good", "slightly"))
    assert not any(r["significant"] for r in one["rows"])  # one query moved: noise
    noted = [p for p in c.pairs if p["notes"]]
    assert {p["candidate"] for p in noted} == {"slightly"} and len(noted) == 3
    assert all(p["in_sample"] == ["slightly"] for p in noted)
    code, out, err = pgeval("compare", *names, "--format", "json", "--permutations", "2000")
    assert code == 0, err
    data = json.loads(out)
    assert data["correction"] == "holm" and len(data["pairs"]) == 6
    assert "picked in-sample" in _one_line(err)
    code, out, err = pgeval("compare", "good", "lost", "reordered", "--permutations", "2000")
    assert code == 0 and "p Holm" in out and "good → lost" in out, err
    assert "latency (ms)" in out  # good alone has timings: its pairs list them, None opposite


def test_holm_on_a_textbook_case():
    from evaluator.measure import stats

    p = [0.01, 0.04, 0.03, 0.005]
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm(p) == pytest.approx(_holm_by_hand(p))
    assert stats.holm([]) == []
