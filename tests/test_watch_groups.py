"""`pgeval watch --group-by tenant` (issue 36, "watch per tenant") on the real server: a table of
5 tenants (45 % down to 0.5 %) with a btree on the tenant column and an HNSW index, probed with
the planner's own plan.

- The smallest tenant is served exactly through its btree: probed as served (recall 1.0, its
  plan named), while the large tenants, filtered through HNSW at a low ``ef_search``, cross
  ``--min-recall``: exit 2, each crossed group named; every probe recorded.
- One group fails for real (another probe of its series holds the series' lock): every other
  group is still measured and its crossed bounds printed, the failed group is named on stderr,
  the exit code is 2 (a bound crossed) or 1 (none), and no probe of that watch is recorded.
- A statement timeout too short for every probe (the application's statement as the target's,
  its measured run slowed by a pg_sleep): exit 1, each group named, nothing recorded.
- A programming error (not one of pgeval's) is raised as it is, and what the watch recorded
  before it is deleted all the same.
"""

from __future__ import annotations

import json

import clustered_kb
import pytest

pytestmark = pytest.mark.slow

TABLE, DIM, N = "wgroups_kb", 32, 4000
TARGET = "wgroups"
SHARES = {"t45": 0.45, "t30": 0.30, "t15": 0.15, "t095": 0.095, "t005": 0.005}
WATCH = [
    "watch",
    "--target",
    TARGET,
    "--stage",
    "hnsw",
    "--group-by",
    "tenant",
    "--sample-queries",
    "10",
    "--set",
    "hnsw.ef_search=10",
    "--no-remedy",
]


@pytest.fixture(scope="module")
def kb(database):
    clustered_kb.tenant_table(database, TABLE, dim=DIM, n=N, shares=SHARES)
    from evaluator.targets.add import add_target

    add_target(database, TARGET, table=TABLE, id_column="id", vector_column="e", replace=True)
    yield TARGET
    with database.connect(autocommit=True) as c:
        c.execute("DELETE FROM pgeval.probe WHERE target = %s", (TARGET,))
    clustered_kb.drop(database, TABLE)


def probe_ids(conn, target: str = TARGET) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT probe_id FROM pgeval.probe WHERE target = %s ORDER BY probe_id", (target,)
        )
    ]


def watch_json(pgeval, *args: str) -> tuple[int, dict, str]:
    code, out, err = pgeval(*WATCH, *args, "--format", "json")
    assert "Traceback" not in err, err
    assert code in (0, 1, 2), err
    return code, json.loads(out), err


def test_exact_tenants_are_probed_as_served_and_a_crossed_bound_exits_2(pgeval, conn, kb):
    before = probe_ids(conn)
    code, d, err = watch_json(pgeval, "--min-recall", "0.9")
    assert code == 2, err
    probes = {p["group_key"]["tenant"]: p for p in d["probes"]}
    assert set(probes) == set(SHARES) and "errors" not in d
    # the smallest tenant: the planner's own plan is its btree and a sort, exact
    small = probes["t005"]
    assert small["recall"] == 1.0 and small["crossed"] == [] and small["status"] == "ok"
    assert small["plan"]["mode"] == "custom" and small["plan"]["ann"] is False
    assert small["plan"]["served_by"].startswith("exact via wgroups_kb_tenant"), small["plan"]
    # the largest, through HNSW filtered afterwards at ef_search = 10: far below the bound
    big = probes["t45"]
    assert big["plan"] == {
        "mode": "custom",
        "served_by": "index wgroups_kb_hnsw (hnsw)",
        "ann": True,
    }
    assert big["recall"] < 0.9 and big["crossed"] == ["min_recall"]
    for tenant, p in probes.items():
        named = f"pgeval: watch: tenant={tenant}: recall@10" in err
        assert named == bool(p["crossed"]), (tenant, err)
    assert "error" not in err
    # every probe recorded, one row each
    new = [i for i in probe_ids(conn) if i not in before]
    assert sorted(new) == sorted(p["probe_id"] for p in probes.values())
    # the table says what served the exact tenant
    code, out, err = pgeval(*WATCH, "--min-recall", "0.9")
    assert code == 2, err
    assert "custom plan: exact via wgroups_kb_tenant" in out
    assert "index build None" not in out and "index None" not in out


def _hold_series_lock(database, series: str):
    """Another probe of ``series`` running: its advisory lock held in an open transaction."""
    from evaluator.core.canonical import sha256_hex
    from evaluator.tuning.watch.probe import WATCH_LOCK

    holder = database.connect()
    key = (WATCH_LOCK, int(sha256_hex(series)[:8], 16) - 2**31)
    assert holder.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", key).fetchone()[0]
    return holder


def test_a_failed_group_is_named_the_others_measured_and_nothing_recorded(
    pgeval, conn, database, kb
):
    code, d, err = watch_json(pgeval, "--min-recall", "0")
    assert code == 0, err
    series = {p["group_key"]["tenant"]: p["sweep"] for p in d["probes"]}
    holder = _hold_series_lock(database, series["t15"])
    try:
        before = probe_ids(conn)
        # a bound crossed in the groups measured: exit 2, the crossed groups and the failed one
        code, d, err = watch_json(pgeval, "--min-recall", "0.9")
        assert code == 2, err
        assert probe_ids(conn) == before  # nothing of this watch recorded
        assert d["recorded"] is False
        assert sorted(p["group_key"]["tenant"] for p in d["probes"]) == sorted(
            set(SHARES) - {"t15"}
        )
        (error,) = d["errors"]
        assert error["group_key"] == {"tenant": "t15"}
        assert error["error"].startswith("tenant=t15: another probe of this series is running")
        assert "pgeval: watch: tenant=t45: recall@10" in err
        assert "pgeval: error: watch: tenant=t15: another probe of this series" in err
        assert "1 of 5 groups failed: no probe of this watch is recorded" in err
        # no bound crossed: exit 1, the group named; the table and openmetrics say so too
        code, out, err = pgeval(*WATCH, "--min-recall", "0")
        assert code == 1, err
        assert "pgeval: error: watch: tenant=t15: another probe" in err
        assert "pgeval: watch: tenant=" not in err
        assert "1 of 5 groups failed (tenant=t15): no probe of this watch is recorded" in out
        code, out, err = pgeval(*WATCH, "--min-recall", "0", "--format", "openmetrics")
        assert code == 1, err
        assert f'pgeval_probe_error{{target="{TARGET}",stage="hnsw",k="10",group="t15"}} 1' in out
        assert out.count("pgeval_probe_recall{") == 4
        assert probe_ids(conn) == before
    finally:
        # the lock released before the next watch (a close alone ends the session, and its
        # lock, some time after it returns: the next probe of t15 could still find it held)
        holder.rollback()
        holder.close()
    # the series free again: the watch records every group
    code, d, err = watch_json(pgeval, "--min-recall", "0")
    assert code == 0, err
    assert len([i for i in probe_ids(conn) if i not in before]) == len(SHARES)


# the application's statement as the target's, its measured run slowed by a pg_sleep of 2 s
# (an InitPlan run once per statement, cancelled by the timeout): every ANN statement runs past
# a short timeout, on any machine. The exact twin runs with index scans off
# (target.statement.TWIN_SETTINGS) and sleeps 0 s: each group's ground truth is computed, and it
# is the measured statement that the timeout cancels. (LIMIT 11: 10 rows besides the sampled
# query's own)
SLOW_TARGET = "wgroups-slow"
SLOW_STATEMENT = (
    f"SELECT id, e <=> $1 AS distance FROM {TABLE} WHERE tenant = $2 AND (SELECT pg_sleep("
    "CASE current_setting('enable_indexscan') WHEN 'on' THEN 2 ELSE 0 END)) IS NOT NULL "
    "ORDER BY e <=> $1 LIMIT 11"
)


@pytest.fixture
def slow_target(pgeval, kb):
    code, _, err = pgeval(
        "target", "add", SLOW_TARGET, "--table", TABLE, "--id-column", "id", "--vector-column",
        "e", "--group-by", "tenant", "--statement", SLOW_STATEMENT, "--replace",
    )  # fmt: skip
    assert code == 0, err
    yield SLOW_TARGET
    code, _, err = pgeval("target", "remove", SLOW_TARGET)
    assert code == 0, err


def test_a_statement_timeout_names_each_group_and_records_nothing(pgeval, conn, slow_target):
    before = probe_ids(conn, slow_target)
    slow = [slow_target if a == TARGET else a for a in WATCH]
    # 200 ms: far below the statement's 2 s, far above anything else a probe runs here
    code, out, err = pgeval(*slow, "--min-recall", "0", "--statement-timeout", "200ms")
    assert code == 1, err
    assert "Traceback" not in err
    failed = [t for t in SHARES if f"pgeval: error: watch: tenant={t}: " in err]
    assert failed == list(SHARES), err  # every group: each one's statements sleep
    assert "statement timeout" in err
    assert "a statement ran past the statement timeout" in err  # the measured one
    assert f"{len(failed)} of 5 groups failed: no probe of this watch is recorded" in err
    assert probe_ids(conn, slow_target) == before


def test_a_programming_error_is_raised_as_it_is_and_nothing_recorded(
    conn, database, kb, monkeypatch
):
    """Not one of pgeval's errors: raised at once, not collected, and the probes this watch
    recorded before it are deleted all the same."""
    from evaluator.api import Pgeval
    from evaluator.tuning.watch import groups

    real, calls = groups.run_probe, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(groups, "run_probe", second_fails)
    before = probe_ids(conn)
    with pytest.raises(RuntimeError, match="a bug"):
        Pgeval(database).watch(
            TARGET,
            "hnsw",
            sample_queries=10,
            settings=["hnsw.ef_search=10"],
            remedy=False,
            group_by="tenant",
        )
    assert len(calls) == 2 and probe_ids(conn) == before


def test_the_message_names_each_group_as_the_front_end_spells_its_options():
    from evaluator.core.errors import DatabaseError, GroupFailure, GroupsFailed, param

    failed = GroupsFailed(
        ["measured"],
        [
            GroupFailure(
                {"tenant": "t3"}, DatabaseError(f"too slow: {param('statement_timeout')}")
            ),
            GroupFailure({"tenant": "t5"}, DatabaseError("gone\nDETAIL: more")),
        ],
        what="no probe of this watch recorded",
    )
    assert str(failed) == (
        "2 of 3 groups failed, no probe of this watch recorded: "
        "tenant=t3: too slow: `statement_timeout`; tenant=t5: gone"
    )
    assert "tenant=t3: too slow: --statement-timeout" in failed.text(
        lambda name, value: "--" + name.replace("_", "-")
    )
    assert failed.exit_code == 1 and failed.results == ["measured"]


def test_group_queries_sets_the_queries_of_each_group(pgeval, conn, kb):
    """--sample-queries N is the whole sample (here 10: under 30, so 10 a group); --group-queries
    M asks M of each group; without a group column it is refused in one line."""
    code, d, err = watch_json(pgeval, "--min-recall", "0", "--max-groups", "2")
    assert code == 0, err
    assert [p["queries"] for p in d["probes"]] == [10, 10]
    code, d, err = watch_json(
        pgeval, "--min-recall", "0", "--max-groups", "2", "--group-queries", "4"
    )
    assert code == 0, err
    assert [p["queries"] for p in d["probes"]] == [4, 4]
    code, out, err = pgeval(
        "watch", "--target", TARGET, "--stage", "hnsw", "--group-by", "", "--group-queries", "4"
    )
    assert code == 1 and out == "" and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("pgeval: error: ") and "--group-queries applies with --group-by" in line
