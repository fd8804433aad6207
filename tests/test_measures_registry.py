"""One measure registry: evaluator/measure/measures.py and the SQL API (pgeval.ranked_measures(),
pgeval.max_cutoff(), pgeval.measure_spec) agree, and gate and metrics accept what SQL accepts."""

from __future__ import annotations

import pathlib
import re

import pytest

from evaluator.measure import measures


def test_sql_and_python_registries_are_equal(conn):
    families, max_k, defaults = conn.execute(
        "SELECT pgeval.ranked_measures(), pgeval.max_cutoff(), pgeval.default_measures()"
    ).fetchone()
    assert tuple(families) == measures.RANKED
    assert max_k == measures.MAX_K
    assert tuple(defaults) == measures.DEFAULT_MEASURES
    table = conn.execute("SELECT family, needs_cutoff FROM pgeval.measure_families()").fetchall()
    # one row per spelling: map, spelled map@K and map, has two
    assert table == [
        (f.name, cut)
        for f in measures.FAMILIES
        if f.kind == "ranked"
        for cut in (True, False)
        if (f.takes_cutoff if cut else not f.needs_cutoff)
    ]
    assert measures.UNCUT == ("map", "rprec")
    assert "map" in measures.RANKED


def test_sql_and_python_spell_a_cut_off_by_one_rule(conn):
    """One rule for name@K on both sides (index_recall@K has an underscore: it is in the rule),
    and it spells every measure with a cut-off, in SQL as in Python."""
    (pattern,) = conn.execute("SELECT pgeval.measure_name_pattern()").fetchone()
    assert pattern == measures.NAME_PATTERN
    names = [f"{f.name}@10" for f in measures.FAMILIES if f.takes_cutoff]
    assert "index_recall@10" in names
    matched = conn.execute(
        "SELECT array_agg(n ~ pgeval.measure_name_pattern() ORDER BY o) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(n, o)",
        (names + ["Recall@10", "recall@0", "ndcg_@10"],),
    ).fetchone()[0]
    assert matched == [
        re.match(measures.NAME_PATTERN, n) is not None
        for n in names + ["Recall@10", "recall@0", "ndcg_@10"]
    ]
    assert matched[: len(names)] == [True] * len(names)


def test_every_family_names_an_sql_function_that_exists(conn):
    for family in measures.FAMILIES:
        (found,) = conn.execute("SELECT to_regproc(%s) IS NOT NULL", (family.sql,)).fetchone()
        assert found, (family.name, family.sql)


@pytest.mark.parametrize(
    "name, family, cutoff, kind",
    [
        ("ndcg@10", "ndcg", 10, "ranked"),
        ("rprec", "rprec", None, "ranked"),
        ("map", "map", None, "ranked"),
        ("map@10", "map", 10, "ranked"),
        ("citation_precision", "citation_precision", None, "answer"),
        ("latency_p99_9_ms", "latency", None, "latency"),
        ("answer_latency_p95_ms", "answer_latency", None, "latency"),
        ("index_recall@5", "index_recall", 5, "index"),
        ("judged@10", "judged", 10, "ranked"),
    ],
)
def test_parse_gives_the_measure_object(name, family, cutoff, kind):
    m = measures.parse(name)
    assert (m.name, m.family.name, m.cutoff, m.kind) == (name, family, cutoff, kind)
    assert m.higher_is_better == (kind != "latency")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("rprec@10", "rprec takes no cut-off: write 'rprec'"),
        ("recall", "recall needs a cut-off: write 'recall@K'"),
        ("Rprec", "unknown measure 'Rprec'"),
        ("latency", "unknown measure 'latency'"),
        ("latency@5", "unknown measure 'latency@5'"),
        ("MAP", "unknown measure 'MAP'"),
        ("map@0", "unknown measure 'map@0'"),
    ],
)
def test_parse_says_why_a_name_is_refused(name, reason):
    with pytest.raises(measures.UnknownMeasure) as exc:
        measures.parse(name)
    assert str(exc.value).startswith(reason)


def test_default_lists_come_from_the_registry():
    from evaluator.measure import metrics

    assert metrics.measures_for() == list(measures.DEFAULT_MEASURES)
    assert measures.STAGE_MEASURES == (
        "recall@3",
        "recall@5",
        "recall@10",
        "mrr@20",
        "ndcg@5",
        "ndcg@10",
    )
    assert measures.stage_measures(20)[:2] == ["recall@20", "recall@3"]
    assert measures.stage_measures(5) == list(measures.STAGE_MEASURES)
    assert measures.cutoffs(["recall@3", "rprec", "recall@10", "mrr@20"]) == {
        "recall": [3, 10],
        "mrr": [20],
    }


# a measure name taken apart by hand ('ndcg@10'.split('@'), m.startswith('recall@'), ...)
_HAND_PARSED = re.compile(
    r"""(split|partition)\(\s*["']@["']"""
    r"""|(startswith|endswith)\(\s*f?["'](\{[^}]*\}|[a-z_]*)@"""
    r"""|\(recall\|mrr\|ndcg"""  # a regex over the families
    r"""|\(\s*["']recall["'],\s*["']mrr["']"""  # a tuple of them
)


def test_no_other_module_parses_measure_names():
    """Measure names are parsed by measures.parse only: no '@' split, prefix test, family regex
    or family tuple in the packages that read measures (measure/, reporting/, cli/, api)."""
    root = pathlib.Path(measures.__file__).parents[1]
    files = [
        path
        for sub in ("measure", "reporting", "cli", "api")
        for path in (root / sub).rglob("*.py")
    ]
    offenders = [
        str(path.relative_to(root))
        for path in files
        if path.name != "measures.py" and _HAND_PARSED.search(path.read_text())
    ]
    assert offenders == []
    # the pattern does catch what it is for (the spellings removed from json.py and compare.py)
    assert _HAND_PARSED.search('name, k = m.split("@")')
    assert _HAND_PARSED.search('m.endswith(f"@{report.k}") or m.startswith("mrr@")')
    assert _HAND_PARSED.search('m.split("@")[0] in ("recall", "mrr", "ndcg", "precision")')
    assert _HAND_PARSED.search('for name in ("recall", "mrr", "ndcg"):')


@pytest.mark.parametrize(
    "name",
    [
        "recall@1",
        "ndcg@10",
        "mrr@20",
        "hit@100000",
        "precision@3",
        "recall@100001",
        "recall@0",
        "recall@01",
        "Recall@10",
        "map@10",
        "map",
        "map@0",
        "recall",
        "recall@10 ",
        "ndcg@1000000",
        "rprec",
        "rprec@10",
        "Rprec",
        "citation_precision",
    ],
)
def test_sql_accepts_exactly_what_python_accepts(conn, name):
    found = measures.find(name)
    ok = found is not None and found.kind == "ranked"
    try:
        conn.execute("SELECT * FROM pgeval.measure_spec(ARRAY[%s])", (name,)).fetchall()
        sql_ok = True
    except Exception as exc:  # the connection is autocommit: nothing to roll back
        assert "unknown measure" in str(exc)
        sql_ok = False
    assert sql_ok == ok, name


def test_gate_names_every_known_measure(tmp_path):
    from evaluator.core.errors import InputError
    from evaluator.reporting.gate import load_rules

    good = tmp_path / "good.toml"
    good.write_text(
        "[metrics.'recall@100000']\nmin = 0.1\n[metrics.citation_precision]\n"
        "min = 0.5\n[metrics.latency_p99_9_ms]\nmax_growth_pct = 10\n"
    )
    assert {r.metric for r in load_rules(good).rules} == {
        "recall@100000",
        "citation_precision",
        "latency_p99_9_ms",
    }
    bad = tmp_path / "bad.toml"
    bad.write_text("[metrics.'recall@100001']\nmin = 0.1\n")
    with pytest.raises(InputError, match=r"unknown metric 'recall@100001'.*ndcg@K"):
        load_rules(bad)
