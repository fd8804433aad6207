"""MAP against trec_eval (pytrec_eval): ``map`` and ``map@K`` equal trec_eval's ``map`` and
``map_cut_K`` on a tie-heavy run (three score values over 30 chunks, so most ranks are decided by
the tie rule, chunk id descending, as trec_eval orders them), at every relevance threshold, per
query and as the mean; and a query the run misses scores 0 in the mean, as trec_eval's ``-c``."""

from __future__ import annotations

import random

import pytest
from helpers import make_testset

from evaluator.measure import metrics
from evaluator.run.runs import import_run

pytrec_eval = pytest.importorskip("pytrec_eval")

CHUNKS = [f"c{i:02d}" for i in range(30)]
CUTS = (1, 3, 10, 25)


@pytest.fixture(scope="module")
def tied(database, tmp_path_factory):
    rng = random.Random(39)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(80):
        qid = f"q{i:02d}"
        judged = rng.sample(CHUNKS, rng.randint(3, 12))
        qrels[qid] = {c: rng.choice((0, 1, 1, 2, 3)) for c in judged}
        qrels[qid][judged[0]] = 3  # valid at every threshold
        # the first 20 chunks in a random order with three scores: ties everywhere
        run[qid] = {c: rng.choice((1.0, 0.5, 0.25)) for c in rng.sample(CHUNKS, 20)}
    qrels["q-missing"] = {"c00": 3}  # valid, absent from the run
    lines = [f"{q} Q0 {c} 0 {s!r} tied\n" for q, d in run.items() for c, s in d.items()]
    rng.shuffle(lines)
    path = tmp_path_factory.mktemp("map") / "tied.trec"
    path.write_text("".join(lines))
    with database.connect(autocommit=True) as conn:
        conn.execute("DELETE FROM pgeval.testset WHERE name = 'map-ties'")
        make_testset(conn, "map-ties", qrels)
        import_run(conn, path, "map-ties", "map-ties-run", "trec")
        # statistics, as autovacuum would gather them: without them the planner guesses one
        # list per run and rescans the run's lists once per query
        conn.execute("ANALYZE pgeval.result_list, pgeval.query")
        rid = metrics.resolve_run(conn, "map-ties-run").run_id
    return qrels, run, rid


@pytest.mark.parametrize("rel", [1, 2, 3])
def test_map_and_map_cut_match_trec_eval_on_ties(conn, tied, rel):
    qrels, run, rid = tied
    names = ["map"] + [f"map@{k}" for k in CUTS]
    ours = {r["query_id"]: r for r in metrics.per_query(conn, rid, names, rel)}
    wanted = {"map"} | {f"map_cut_{k}" for k in CUTS}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, wanted, relevance_level=rel).evaluate(run)
    valid = [q for q in run if any(g >= rel for g in qrels[q].values())]
    assert len(valid) == 80
    for q in valid:
        assert ours[q]["map"] == pytest.approx(theirs[q]["map"], abs=1e-12), q
        for k in CUTS:
            assert ours[q][f"map@{k}"] == pytest.approx(theirs[q][f"map_cut_{k}"], abs=1e-12), q
    # the comparison has teeth: the values spread, and cutting changes them
    assert len({round(ours[q]["map"], 9) for q in valid}) > 40
    assert sum(ours[q]["map@3"] < ours[q]["map"] for q in valid) > 20
    assert ours["q-missing"]["map"] == 0.0
    # the mean: trec_eval's over the queries it saw, with the missing query as a zero
    means = metrics.summary(conn, rid, names, rel)
    n = len(valid) + 1
    assert means["map"] == pytest.approx(sum(theirs[q]["map"] for q in valid) / n, abs=1e-12)
    assert means["map@10"] == pytest.approx(
        sum(theirs[q]["map_cut_10"] for q in valid) / n, abs=1e-12
    )
