"""Cross-check of the SQL metrics against pytrec_eval (trec_eval) on the Cranfield collection:
a brute-force cosine run over the precomputed all-MiniLM-L6-v2 embeddings, imported as a TREC run.

Recall via recall_K, nDCG via ndcg_cut_K on judgements relabelled to 2^g - 1 (trec_eval's gain is
the label itself), MRR@20 via recip_rank on the run truncated at 20, R-precision via Rprec (at
every relevance threshold). Skipped without ../shared."""

import numpy as np
import pytest
from helpers import make_testset

from evaluator.measure import metrics
from evaluator.run.runs import import_run
from evaluator.testset.datasets import cranfield

pytrec_eval = pytest.importorskip("pytrec_eval")


@pytest.fixture(scope="module")
def cran(shared_dir, database, tmp_path_factory):
    folder = shared_dir / "data" / "cranfield"
    qrels: dict[str, dict[str, int]] = {}
    for q, d, code in cranfield.qrels(folder):
        qrels.setdefault(q, {})[d] = cranfield.GRADE_MAP[code]
    docs = np.load(folder / "minilm" / "documents.npy")
    queries = np.load(folder / "minilm" / "queries.npy")
    sims = queries @ docs.T
    run: dict[str, dict[str, float]] = {}
    lines = []
    for i in range(sims.shape[0]):
        top = np.argsort(-sims[i], kind="stable")[:100]
        run[str(i + 1)] = {str(j + 1): float(sims[i, j]) for j in top}
        lines += [
            f"{i + 1} Q0 {j + 1} {r} {float(sims[i, j])!r} exact\n" for r, j in enumerate(top, 1)
        ]
    path = tmp_path_factory.mktemp("cran") / "exact.trec"
    path.write_text("".join(lines))
    with database.connect(autocommit=True) as conn:
        conn.execute("DELETE FROM pgeval.testset WHERE name = 'cran-x'")
        make_testset(conn, "cran-x", qrels)
        import_run(conn, path, "cran-x", "cran-x-exact", "trec")
        # statistics, as `pgeval testset load` and autovacuum gather them: without them the
        # planner expects one list per run and rescans the run's lists once per query
        conn.execute("ANALYZE pgeval.result_list, pgeval.query")
    return qrels, run


def _trec(qrels, run, measures, relabel=False):
    q = {k: {d: (2**g - 1 if relabel else g) for d, g in v.items()} for k, v in qrels.items()}
    return pytrec_eval.RelevanceEvaluator(q, set(measures)).evaluate(run)


def test_recall_ndcg_mrr_match_trec_eval(conn, cran):
    qrels, run = cran
    rid = metrics.resolve_run(conn, "cran-x-exact").run_id
    ours = {
        r["query_id"]: r
        for r in metrics.per_query(
            conn, rid, ["recall@5", "recall@10", "recall@100", "ndcg@5", "ndcg@10", "mrr@20"]
        )
    }
    rec = _trec(qrels, run, {"recall_5", "recall_10", "recall_100"})
    ndcg = _trec(qrels, run, {"ndcg_cut_5", "ndcg_cut_10"}, relabel=True)
    top20 = {
        q: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))[:20]) for q, d in run.items()
    }
    rr = _trec(qrels, top20, {"recip_rank"})
    valid = [q for q, g in qrels.items() if any(v >= 1 for v in g.values())]
    assert len(valid) == len(ours) > 200
    for q in valid:
        for k in (5, 10, 100):
            assert ours[q][f"recall@{k}"] == pytest.approx(rec[q][f"recall_{k}"], abs=1e-9), q
        for k in (5, 10):
            assert ours[q][f"ndcg@{k}"] == pytest.approx(ndcg[q][f"ndcg_cut_{k}"], abs=1e-9), q
        assert ours[q]["mrr@20"] == pytest.approx(rr[q]["recip_rank"], abs=1e-9), q
    mean_ndcg = metrics.summary(conn, rid, ["ndcg@10"])["ndcg@10"]
    assert 0.2 < mean_ndcg < 0.5  # the collection's README: about 0.36 with its own grade scale


@pytest.mark.parametrize("rel", [1, 2, 3])
def test_r_precision_matches_trec_eval(conn, cran, rel):
    """rprec = trec_eval's Rprec with -l rel: precision at R, R = chunks of grade >= rel."""
    qrels, run = cran
    rid = metrics.resolve_run(conn, "cran-x-exact").run_id
    ours = {r["query_id"]: r["rprec"] for r in metrics.per_query(conn, rid, ["rprec"], rel)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"Rprec"}, relevance_level=rel)
    theirs = evaluator.evaluate(run)
    valid = [q for q, g in qrels.items() if any(v >= rel for v in g.values())]
    assert sorted(ours) == sorted(valid) and len(valid) > 50  # 67 at grade >= 3
    assert max(ours.values()) > 0.5  # the run finds something: the comparison has teeth
    for q in valid:
        assert ours[q] == pytest.approx(theirs[q]["Rprec"], abs=1e-9), q
    mean = metrics.summary(conn, rid, ["rprec"], rel)["rprec"]
    assert mean == pytest.approx(sum(ours.values()) / len(ours), abs=1e-12)


@pytest.mark.parametrize("rel", [1, 3])
def test_map_matches_trec_eval(conn, cran, rel):
    """map = trec_eval's map and map@K its map_cut_K (with -l rel), over the 100-deep run."""
    qrels, run = cran
    rid = metrics.resolve_run(conn, "cran-x-exact").run_id
    names = ["map", "map@5", "map@100"]
    ours = {r["query_id"]: r for r in metrics.per_query(conn, rid, names, rel)}
    wanted = {"map", "map_cut_5", "map_cut_100"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, wanted, relevance_level=rel).evaluate(run)
    valid = [q for q, g in qrels.items() if any(v >= rel for v in g.values())]
    assert sorted(ours) == sorted(valid) and len(valid) > 50
    assert max(r["map"] for r in ours.values()) > 0.5
    for q in valid:
        assert ours[q]["map"] == pytest.approx(theirs[q]["map"], abs=1e-9), q
        assert ours[q]["map@5"] == pytest.approx(theirs[q]["map_cut_5"], abs=1e-9), q
        assert ours[q]["map@100"] == pytest.approx(theirs[q]["map_cut_100"], abs=1e-9), q


def test_judged_at_k_is_a_count_by_hand(conn, cran):
    """judged@K: the chunks of the first K with a judgement (grade 0 included) over K, counted
    here from the run and the judgements; the mean is over the valid queries."""
    qrels, run = cran
    rid = metrics.resolve_run(conn, "cran-x-exact").run_id
    ours = {r["query_id"]: r for r in metrics.per_query(conn, rid, ["judged@10", "judged@3"])}
    valid = [q for q, g in qrels.items() if any(v >= 1 for v in g.values())]
    for q in valid:
        ranked = sorted(run[q], key=lambda d: (-run[q][d], d))
        for k in (3, 10):
            by_hand = sum(1 for d in ranked[:k] if d in qrels[q]) / k
            assert ours[q][f"judged@{k}"] == pytest.approx(by_hand, abs=1e-12), q
    assert any(0 < r["judged@10"] < 1 for r in ours.values())  # judged and unjudged: teeth
    assert any(0 in g.values() for g in qrels.values())  # grade 0 exists and counts as judged
    mean = metrics.summary(conn, rid, ["judged@10"])["judged@10"]
    assert mean == pytest.approx(sum(r["judged@10"] for r in ours.values()) / len(valid))


def test_judged_only_matches_trec_eval_dash_j(conn, cran):
    """--judged-only = trec_eval's -J (pytrec_eval's judged_docs_only_flag): the unjudged chunks
    are taken out of each list before it is measured."""
    qrels, run = cran
    rid = metrics.resolve_run(conn, "cran-x-exact").run_id
    names = ["recall@5", "recall@10", "precision@5", "ndcg@10", "map@10", "map", "rprec"]
    ours = {r["query_id"]: r for r in metrics.per_query(conn, rid, names, judged_only=True)}
    plain = {r["query_id"]: r for r in metrics.per_query(conn, rid, names)}
    wanted = {"recall_5", "recall_10", "P_5", "map_cut_10", "map", "Rprec"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, wanted, judged_docs_only_flag=True).evaluate(run)
    relabel = {k: {d: 2**g - 1 for d, g in v.items()} for k, v in qrels.items()}
    ndcg = pytrec_eval.RelevanceEvaluator(
        relabel, {"ndcg_cut_10"}, judged_docs_only_flag=True
    ).evaluate(run)
    valid = [q for q, g in qrels.items() if any(v >= 1 for v in g.values())]
    assert sorted(ours) == sorted(valid)
    pairs = [
        ("recall@5", "recall_5"),
        ("recall@10", "recall_10"),
        ("precision@5", "P_5"),
        ("map@10", "map_cut_10"),
        ("map", "map"),
        ("rprec", "Rprec"),
    ]
    for q in valid:
        for mine, trec in pairs:
            assert ours[q][mine] == pytest.approx(theirs[q][trec], abs=1e-9), (q, mine)
        assert ours[q]["ndcg@10"] == pytest.approx(ndcg[q]["ndcg_cut_10"], abs=1e-9), q
    # the lists lose their unjudged chunks: the figures change (the comparison has teeth)
    assert sum(ours[q]["ndcg@10"] > plain[q]["ndcg@10"] + 1e-9 for q in valid) > 50
    means = metrics.summary(conn, rid, names, judged_only=True)
    assert means["ndcg@10"] == pytest.approx(sum(ours[q]["ndcg@10"] for q in valid) / len(valid))
