"""pgeval pointed at production topologies (issue "Safe to point at production"), on Debian's
PostgreSQL 15 with pgvector in a throwaway cluster:

- **PgBouncer in transaction pooling** (Debian's pgbouncer, no reset query): after every command
  pgeval runs through it — init, target add, fingerprint, health, a sweep (also with
  ``--concurrency 4`` and with ``--build`` on a scratch copy), warmup, a pipeline, metrics — each
  server connection of the pool shows exactly the settings it showed before, no prepared
  statement, no advisory lock, and takes an application's write;
- **a hot standby** (``pg_basebackup -R``) is its own configuration: another config hash, the
  server part of ``pgeval diff`` names it, and the identical sweep stored in the same results
  database measures the standby instead of reporting the primary's points.

Skipped, with the reason, where PostgreSQL 15 with pgvector or PgBouncer is not installed
(``.ci/pg15.sh`` and ``.ci/run`` install them on Debian).
"""

from __future__ import annotations

import json

import pg_real
import prerequisites
import psycopg
import pytest
from helpers import wait_for

MAJOR = 15
POOL = 8  # server connections per database and user
pytestmark = [
    prerequisites.mark("pg15", pg_real.unavailable(MAJOR)),
    prerequisites.mark("pgbouncer", pg_real.bouncer_unavailable()),
    pytest.mark.slow,
]

# PgBouncer sets these on a server connection for each client from the client's own startup
# values (so they are the probing client's, whatever the previous client had)
# PostgreSQL sets these afresh at every transaction start; after a SET TRANSACTION their source
# reads 'session', but their value is the next transaction's own (compared below all the same)
PER_TRANSACTION = {"transaction_read_only", "transaction_isolation", "transaction_deferrable"}
# a small sweep of the table as a DBA runs it (sampled queries, no test set)
SWEEP = ["sweep", "--sample-queries", "30", "--target", "docs", "--stage", "hnsw"]
SWEEP += ["--param", "hnsw.ef_search=10,40", "--repeat", "1", "--set", "enable_seqscan=off"]
TRACKED = PER_TRANSACTION | {
    "client_encoding",
    "datestyle",
    "timezone",
    "standard_conforming_strings",
    "application_name",
}


@pytest.fixture(scope="module")
def primary():
    cluster = pg_real.Cluster(MAJOR).start()
    try:
        with cluster.connect() as su:
            su.execute("CREATE DATABASE kb")
        with cluster.connect(dbname="kb") as c:
            c.execute("CREATE EXTENSION vector")
            pg_real.build_kb(c, "docs")
            # the application's own table, written through the pooler after each command
            c.execute("CREATE TABLE app_writes (n serial PRIMARY KEY, at timestamptz)")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def bouncer(primary):
    b = pg_real.Bouncer(primary, pool_size=POOL).start()
    try:
        yield b
    finally:
        b.stop()


def pool_state(bouncer) -> list[dict]:
    """What each of the pool's server connections shows a fresh application client, read by
    POOL clients at once (each in its own transaction, so each holds its own server connection);
    each then writes a row, as the application would."""
    clients = [psycopg.connect(bouncer.dsn(dbname="kb")) for _ in range(POOL)]
    try:
        states = []
        for c in clients:  # non-autocommit: each holds its server connection until commit
            states.append(
                {
                    "pid": c.execute("SELECT pg_backend_pid()").fetchone()[0],
                    "settings": dict(c.execute("SELECT name, setting FROM pg_settings").fetchall()),
                    "session": sorted(
                        r[0]
                        for r in c.execute(
                            "SELECT name FROM pg_settings WHERE source = 'session'"
                        ).fetchall()
                        if r[0] not in TRACKED
                    ),
                    "read_only": c.execute("SHOW transaction_read_only").fetchone()[0],
                    "prepared": [
                        r[0]
                        for r in c.execute("SELECT name FROM pg_prepared_statements").fetchall()
                    ],
                    "locks": c.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                        "AND pid = pg_backend_pid()"
                    ).fetchone()[0],
                }
            )
            c.execute("INSERT INTO app_writes (at) VALUES (now())")
        for c in clients:
            c.commit()
    finally:
        for c in clients:
            c.close()
    assert len({s["pid"] for s in states}) == POOL  # every server connection of the pool
    return states


def assert_untouched(before: list[dict], after: list[dict], command: str) -> None:
    reference = before[0]["settings"]
    for state in after:
        where = f"after `{command}`, server connection {state['pid']}"
        assert state["read_only"] == "off", where
        assert state["session"] == [], f"{where}: session settings {state['session']}"
        assert state["prepared"] == [], f"{where}: prepared {state['prepared']}"
        assert state["locks"] == 0, f"{where}: advisory locks left"
        changed = {
            k: (reference[k], v)
            for k, v in state["settings"].items()
            if k in reference and reference[k] != v
        }
        assert changed == {}, f"{where}: settings changed {changed}"


def test_nothing_is_left_on_pooled_server_connections(bouncer, pgeval, tmp_path):
    """Every command through a transaction pooler leaves the pool as it found it: a fresh client
    on any of its server connections sees the same settings and can write."""
    before = pool_state(bouncer)
    dsn = ("--dsn", bouncer.dsn(dbname="kb"))
    cases = pg_real.write_cases(tmp_path / "cases.jsonl")
    sweep = SWEEP
    commands = [
        ["init"],
        [
            "target",
            "add",
            "docs",
            "--table",
            "docs",
            "--id-column",
            "doc_id",
            "--vector-column",
            "emb",
            "--text-column",
            "body",
        ],
        ["testset", "load", str(cases), "--name", "cases"],
        ["fingerprint", "--target", "docs", "--format", "json"],
        ["health", "--target", "docs"],
        ["warmup", "--target", "docs", "--random-queries", "20"],
        sweep,
        [*sweep, "--concurrency", "4", "--name", "conc"],
        [*sweep[:-4], "--build", "m=8", "--name", "built"],
        [
            "run",
            "pipeline",
            "--testset",
            "cases",
            "--target",
            "docs",
            "--stages",
            "exact,hnsw",
            "--set",
            "hnsw.ef_search=100",
            "--repeat",
            "1",
            "--name",
            "pooled",
        ],
        ["stage-report", "pooled"],
        # a probe: its series' lock held in a lent connection's transaction, its commits
        # pipelined with SET LOCAL synchronous_commit (tuning/watch/connections.py)
        [
            "watch",
            "--target",
            "docs",
            "--stage",
            "hnsw",
            "--sample-queries",
            "20",
            "--set",
            "enable_seqscan=off",
            "--set",
            "hnsw.ef_search=40",
            "--no-remedy",
        ],
    ]
    # tracked, the probe's next ones read the configuration epoch and take the steady path
    probe = commands[-1]
    commands += [["target", "track", "docs"], probe, [*probe, "--format", "json"]]
    paths = []
    for args in commands:
        code, out, err = pgeval(*dsn, *args)
        assert code == 0, f"{args}: {err}"
        assert_untouched(before, pool_state(bouncer), " ".join(args[:2]))
        if args[-1] == "json" and args[0] == "watch":
            paths.append(json.loads(out)["cost"]["path"])
    # (an autovacuum between two probes changes the epoch, and one probe rightly takes the lean
    # path: a few more until one is steady)
    for _ in range(3):
        if "steady" in paths:
            break
        code, out, err = pgeval(*dsn, *probe, "--format", "json")
        assert code == 0, err
        assert_untouched(before, pool_state(bouncer), "watch")
        paths.append(json.loads(out)["cost"]["path"])
    assert "steady" in paths, paths
    # the application's writes all went through (one per probing client and command)
    with bouncer and psycopg.connect(bouncer.dsn(dbname="kb")) as app:
        n = app.execute("SELECT count(*) FROM app_writes").fetchone()[0]
    assert n == POOL * (len(commands) + len(paths))


def test_pooled_sweep_equals_the_direct_one(primary, bouncer, pgeval):
    """The sweep through the pooler measured what the direct one measures (same recall), and is
    its own configuration: the DSN's host and port are part of the fingerprint."""
    args = [*SWEEP, "--format", "json"]
    code, direct, err = pgeval("--dsn", primary.dsn(dbname="kb"), *args, "--name", "direct")
    assert code == 0, err
    code, pooled, err = pgeval("--dsn", bouncer.dsn(dbname="kb"), *args, "--name", "viapool")
    assert code == 0, err
    d, p = json.loads(direct), json.loads(pooled)
    assert [x["index_recall"] for x in d["points"]] == [x["index_recall"] for x in p["points"]]
    # the direct sweep reused none of the points measured through the pooler before it (another
    # host and port: another configuration), and the pooled one none of the direct ones
    assert d["measured"] == 2 and d["reused"] == 0
    assert d["config_hash"] != p["config_hash"]


def test_concurrency_n_runs_in_a_pool_of_n(primary, pgeval):
    """``sweep --concurrency 4`` behind a transaction pool of 4 server connections (issue 50): the
    sweep's snapshot holds one of them for the whole sweep, so its connection serves as the
    first of the 4 clients (tuning/sweep/load.py); before, the fourth client waited for PgBouncer's
    query_wait_timeout and the sweep failed. It measures what the direct sweep measures."""
    clients = 4
    small = pg_real.Bouncer(primary, pool_size=clients, query_wait_timeout=30).start()
    try:
        args = [*SWEEP, "--concurrency", str(clients), "--format", "json"]
        code, direct, err = pgeval("--dsn", primary.dsn(dbname="kb"), *args, "--name", "c-direct")
        assert code == 0, err
        code, pooled, err = pgeval("--dsn", small.dsn(dbname="kb"), *args, "--name", "c-pool")
        assert code == 0, err
    finally:
        small.stop()
    d, p = json.loads(direct), json.loads(pooled)
    assert p["consistency"]["how"] == d["consistency"]["how"] == "one snapshot", p["consistency"]
    assert [x["index_recall"] for x in d["points"]] == [x["index_recall"] for x in p["points"]]
    for point in d["points"] + p["points"]:
        assert point["qps"] > 0, point  # measured under --concurrency


def test_a_pooled_sweep_reads_one_snapshot_while_the_table_changes(bouncer, pgeval, monkeypatch):
    """Through the pooler the sweep's snapshot is held too: its holder's transaction keeps its
    server connection, and each measuring transaction imports the snapshot on whichever server
    connection it gets (any backend of the same server may import it). A writer inserting
    copies of the table's rows through the pooler all along: no ANN list of the sweep holds a
    row the snapshot does not see, though such rows were committed during the sweep and rows
    written before it are listed; the pool is left as it was."""
    import threading
    import time

    before = pool_state(bouncer)
    stop, commits = threading.Event(), []

    def write() -> None:
        # (no automatic preparation: through the pooler it would reach another server session)
        with psycopg.connect(bouncer.dsn(dbname="kb"), prepare_threshold=None) as w:
            while not stop.is_set():  # a copy of a row: the nearest row to it, if seen
                n = len(commits)
                w.execute(
                    "INSERT INTO docs (doc_id, body, emb) SELECT %s, 'written', emb FROM docs "
                    "WHERE doc_id = %s",
                    (f"w{n}", f"d{n % 300 + 1}"),
                )
                w.commit()
                commits.append(1)
                time.sleep(0.003)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    # once the sweep has taken its snapshot, two more commits (the second begun after it): rows
    # the snapshot does not see, committed during the sweep whatever the machine's load (a fast
    # sweep could otherwise end between two of the writer's commits)
    from evaluator.tuning.sweep.snapshot import SharedSnapshot

    take = SharedSnapshot.take

    def take_then_wait(database):
        snap = take(database)
        seen = len(commits)
        wait_for(lambda: len(commits) >= seen + 2 or not writer.is_alive(), pause=0.005)
        return snap

    monkeypatch.setattr(SharedSnapshot, "take", staticmethod(take_then_wait))
    try:
        while len(commits) < 40 and writer.is_alive():
            time.sleep(0.005)
        code, out, err = pgeval(
            "--dsn", bouncer.dsn(dbname="kb"), *SWEEP, "--format", "json", "--name", "pool-live"
        )
    finally:
        stop.set()
        writer.join(10)
    assert code == 0, err
    assert len(commits) > 40  # (the writer wrote all along)
    cons = json.loads(out)["consistency"]
    assert cons["how"] == "one snapshot", cons
    with psycopg.connect(bouncer.dsn(dbname="kb")) as c:
        hidden = c.execute(
            "SELECT array_agg(doc_id) FROM docs WHERE doc_id LIKE 'w%%' "
            "AND NOT txid_visible_in_snapshot(xmin::text::bigint, %s::txid_snapshot)",
            (cons["snapshot"]["txids"],),
        ).fetchone()[0]
        listed = c.execute(
            "SELECT DISTINCT u.c FROM pgeval.run r JOIN pgeval.result_list l USING (run_id), "
            "unnest(l.chunk_ids) u(c) WHERE r.name LIKE 'pool-live.%%'"
        ).fetchall()
        c.execute("DELETE FROM docs WHERE doc_id LIKE 'w%%'")
    assert hidden, "the writer committed nothing during the sweep"
    assert not set(hidden) & {r[0] for r in listed}
    assert any(r[0].startswith("w") for r in listed)  # (rows written before it: seen)
    assert_untouched(before, pool_state(bouncer), "sweep with a writer")


@pytest.fixture(scope="module")
def standby(primary, bouncer):  # after the pooler tests: the standby copies what they wrote
    cluster = pg_real.standby_of(primary)
    try:
        pg_real.wait_replayed(primary, cluster, "kb")
        yield cluster
    finally:
        cluster.stop()


def test_a_standby_is_its_own_configuration(primary, standby, pgeval):
    """The identical sweep against the standby, results stored on the primary: measured again
    (not the primary's stored points), its fingerprint in recovery, and diff names it."""
    results = ("--results-dsn", primary.dsn(dbname="kb"))
    args = [*SWEEP, "--format", "json", "--name", "primary-or-standby"]
    code, first, err = pgeval("--dsn", primary.dsn(dbname="kb"), *results, *args)
    assert code == 0, err
    code, second, changed = pgeval("--dsn", standby.dsn(dbname="kb"), *results, *args)
    assert code == 0, changed
    a, b = json.loads(first), json.loads(second)
    assert [x["index_recall"] for x in a["points"]] == [x["index_recall"] for x in b["points"]]
    assert b["config_hash"] != a["config_hash"]
    assert b["measured"] == len(b["points"]) and b["reused"] == 0  # not the primary's points
    assert b["server"]["in_recovery"] is True and a["server"]["in_recovery"] is False
    assert b["server"]["port"] == str(standby.port)
    # the table names the server too (the same command again: every point kept)
    table = [*args[: args.index("--format")], "--name", "primary-or-standby"]
    code, out, err = pgeval("--dsn", standby.dsn(dbname="kb"), *results, *table)
    assert code == 0, err
    assert f":{standby.port} (standby)" in out and "0 measured" in out, out
    previous = b["previous"]["sweep"]
    assert previous.startswith("primary-or-standby@")
    keys = {c["key"] for c in b["previous"]["changes"]}
    assert "server.in_recovery" in keys, keys
    assert "configuration changed" in changed and "server.in_recovery" in changed
    # the fingerprint says which server answered
    code, out, err = pgeval(
        "--dsn",
        standby.dsn(dbname="kb"),
        *results,
        "fingerprint",
        "--target",
        "docs",
        "--format",
        "json",
    )
    assert code == 0, err
    server = json.loads(out)["fingerprint"]["server"]
    assert server["in_recovery"] is True and server["system_identifier"]
    assert server["port"] == str(standby.port)
    # diff names the server as what differs between the two measurements
    code, out, err = pgeval(
        "--dsn",
        primary.dsn(dbname="kb"),
        *results,
        "diff",
        previous,
        "primary-or-standby",
        "--format",
        "json",
    )
    assert code == 0, err
    assert "server.in_recovery" in out and "server.port" in out


def test_sql_evaluations_through_the_pooler(primary, bouncer, pgeval):
    """pgeval.evaluate_query_recall and pgeval.evaluate_recall (docs/sql.md) called through the
    transaction pooler leave every server connection as they found it, and measure what the
    same call on a direct connection measures."""
    code, _, err = pgeval("--dsn", bouncer.dsn(dbname="kb"), "init")
    assert code == 0, err
    grid = json.dumps({"hnsw.ef_search": [10, 40], "work_mem": "7MB", "enable_seqscan": "off"})
    args = (pg_real.sql_statement("docs"), pg_real.sql_queries("docs"), grid)

    def evaluate(dsn: str, name: str) -> list[float]:
        with psycopg.connect(dsn, prepare_threshold=None) as c:
            vector = c.execute("SELECT emb::text FROM docs ORDER BY doc_id LIMIT 1").fetchone()[0]
            one = pg_real.sql_statement("docs").replace("$1", f"'{vector}'")
            c.execute("SELECT * FROM pgeval.evaluate_query_recall(%s, %s)", (one, grid))
            return [
                r[0]
                for r in c.execute(
                    "SELECT recall FROM pgeval.evaluate_recall(%s, %s, %s, name => %s, "
                    "replace => true)",
                    (*args, name),
                )
            ]

    before = pool_state(bouncer)
    pooled = [evaluate(bouncer.dsn(dbname="kb"), "sql-pooled") for _ in range(3)]
    assert_untouched(before, pool_state(bouncer), "pgeval.evaluate_recall")
    direct = evaluate(primary.dsn(dbname="kb"), "sql-direct")
    assert len(direct) == 2 and all(p == pytest.approx(direct, abs=1e-12) for p in pooled)
