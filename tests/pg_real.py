"""A throwaway cluster of the system's PostgreSQL (Debian's postgresql-NN), for the tests that must
run on a real server other than the embedded one (tests/test_pg15.py), and a small knowledge base
built identically on any server.

The cluster lives in a temporary directory: ``initdb`` (en_US.UTF-8 when the locale exists, else
C.UTF-8), trust authentication on a Unix socket in that directory only (no TCP), a free port.
As root, every server program runs as the ``postgres`` OS user (``runuser``); the directory is
removed by :meth:`Cluster.stop`. :func:`unavailable` says why a version cannot be used (no
binaries, no pgvector >= 0.5 for it) so that the tests skip with that reason — ``.ci/pg15.sh``
installs both on Debian.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import numpy as np

DIM = 16
WORDS = (
    "wing",
    "flow",
    "boundary",
    "layer",
    "pressure",
    "shock",
    "heat",
    "transfer",
    "supersonic",
    "laminar",
    "turbulent",
    "nozzle",
    "jet",
    "plate",
    "cylinder",
    "buckling",
    "panel",
    "flutter",
    "vortex",
    "drag",
    "lift",
    "mach",
)


def bindir(major: int) -> Path:
    return Path(f"/usr/lib/postgresql/{major}/bin")


def _pgvector_version(major: int) -> str | None:
    try:
        share = subprocess.run(
            [str(bindir(major) / "pg_config"), "--sharedir"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        share = f"/usr/share/postgresql/{major}"
    control = Path(share) / "extension" / "vector.control"
    if not control.is_file():
        return None
    for line in control.read_text().splitlines():
        if line.strip().startswith("default_version"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return None


def unavailable(major: int) -> str | None:
    """Why PostgreSQL ``major`` with pgvector cannot be used here, or None."""
    b = bindir(major)
    if not (b / "initdb").exists() or not (b / "pg_ctl").exists():
        return f"PostgreSQL {major} is not installed ({b}); run .ci/pg15.sh on Debian"
    version = _pgvector_version(major)
    if version is None:
        return f"pgvector is not installed for PostgreSQL {major}; run .ci/pg15.sh on Debian"
    if tuple(int(x) for x in version.split(".")[:2]) < (0, 5):
        return f"pgvector {version} for PostgreSQL {major} has no HNSW (0.5 or newer needed)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: cannot start PostgreSQL as another user"
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' OS user to run the server"
    return None


def _locale() -> str:
    out = subprocess.run(
        ["locale", "-a"], capture_output=True, text=True, check=False
    ).stdout.lower()
    names = {x.strip() for x in out.splitlines()}
    return "en_US.UTF-8" if {"en_us.utf8", "en_us.utf-8"} & names else "C.UTF-8"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """initdb + pg_ctl start in a temporary directory; :meth:`dsn` for any role and database."""

    def __init__(self, major: int):
        self.major = major
        self.dir = Path(tempfile.mkdtemp(prefix=f"pgeval-pg{major}-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.locale = _locale()
        self._as = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        proc = subprocess.run(
            [*self._as, *args], capture_output=True, text=True, cwd=self.dir, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> Cluster:
        b = bindir(self.major)
        self._run(
            str(b / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            f"--locale={self.locale}",
        )
        self._run(
            str(b / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.dir} -c listen_addresses='' -c fsync=off",
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(
                    str(bindir(self.major) / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        return f"postgresql://{user}@/{dbname}?host={self.dir}&port={self.port}"

    def connect(self, user: str = "postgres", dbname: str = "postgres"):
        import psycopg

        return psycopg.connect(self.dsn(user, dbname), autocommit=True)


# ---- one small knowledge base, the same on every server ---------------------------------------


def corpus(n_docs: int = 300, n_queries: int = 40):
    """(docs [(id, text, vector)], cases [test-set JSONL records]): seeded; each query's judged
    chunks are its 3 exact cosine neighbours and, for every fourth query, a random chunk."""
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(12, DIM))
    vecs = centers[rng.integers(0, 12, n_docs)] + 0.5 * rng.normal(size=(n_docs, DIM))
    qv = centers[rng.integers(0, 12, n_queries)] + 0.5 * rng.normal(size=(n_queries, DIM))
    vecs, qv = vecs.astype(np.float32), qv.astype(np.float32)
    words = random.Random(5)
    texts = [
        " ".join(words.choice(WORDS) for _ in range(words.randint(5, 12))) for _ in range(n_docs)
    ]
    docs = [(f"d{i + 1}", texts[i], vecs[i]) for i in range(n_docs)]
    nd = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    nq = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    top = np.argsort(-(nq @ nd.T), axis=1)[:, :3]
    cases = []
    for j, row in enumerate(top):
        rel = {f"d{i + 1}": 2 for i in row}
        if j % 4 == 0:
            rel[f"d{words.randrange(n_docs) + 1}"] = 1
        # the query text: three words of its nearest chunk, so keyword search finds something
        text = " ".join(words.sample(texts[row[0]].split(), 3))
        cases.append(
            {
                "id": f"q{j + 1}",
                "query": text,
                "relevant": rel,
                "embedding": [float(x) for x in qv[j]],
            }
        )
    return docs, cases


def vtext(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def build_kb(conn, table: str = "kb_docs", *, gin: bool = False) -> None:
    """``table(doc_id, body, emb vector(16))`` with an HNSW index (and, with ``gin``, a GIN index
    on to_tsvector('english', body)); analysed."""
    docs, _ = corpus()
    conn.execute(f"CREATE TABLE {table} (doc_id text PRIMARY KEY, body text, emb vector({DIM}))")
    with conn.cursor().copy(f"COPY {table} (doc_id, body, emb) FROM STDIN") as cp:
        for d, text, v in docs:
            cp.write_row((d, text, vtext(v)))
    conn.execute("SET max_parallel_maintenance_workers = 0")
    conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (emb vector_cosine_ops)")
    if gin:
        conn.execute(
            f"CREATE INDEX {table}_fts ON {table} USING gin (to_tsvector('english', body))"
        )
    conn.execute(f"ANALYZE {table}")


def sql_statement(table: str, k: int = 10) -> str:
    """The application's statement on ``build_kb``'s table, as pgeval.evaluate_recall takes it."""
    return f"SELECT doc_id, emb <=> $1 AS distance FROM {table} ORDER BY emb <=> $1 LIMIT {k}"


def sql_queries(table: str, n: int = 20) -> str:
    """Its queries: the table's first ``n`` rows by id (each row's own one is in its answer)."""
    return f"SELECT doc_id AS query_id, emb FROM {table} ORDER BY doc_id LIMIT {n}"


def statement_recall_by_hand(conn, table: str, settings: dict, n: int = 20, k: int = 10) -> float:
    """Mean recall@k of ``sql_statement`` run by hand (each setting SET LOCAL) over
    ``sql_queries``' rows, against numpy's exact cosine search over ``corpus()``: a returned row
    counts when its distance is within the k-th exact distance (METRICS.md, index recall)."""
    docs, _ = corpus()
    raw = {d: v for d, _, v in docs}
    mat = np.stack(list(raw.values())).astype(np.float64)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    by_id = dict(zip(raw, mat, strict=True))
    with conn.transaction():
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, str(value)))
        qids = [r[0] for r in conn.execute(f"SELECT doc_id FROM {table} ORDER BY doc_id LIMIT {n}")]
        total = 0.0
        for q in qids:
            d_k = np.sort(1 - mat @ by_id[q])[k - 1]
            got = conn.execute(
                sql_statement(table, k).replace("$1", "%(v)s"),
                {"v": vtext(raw[q])},
            ).fetchall()
            total += sum(1 for _, d in got if d <= d_k + 1e-6 * max(1.0, abs(d_k))) / k
    return total / len(qids)


def write_cases(path: Path) -> Path:
    _, cases = corpus()
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


# ---- PgBouncer in transaction pooling, and a physical standby ----------------------------------


def bouncer_unavailable() -> str | None:
    """Why PgBouncer cannot be started here, or None (``.ci/run`` installs Debian's pgbouncer)."""
    if shutil.which("pgbouncer") is None:
        return "pgbouncer is not installed (Debian package pgbouncer; .ci/run installs it)"
    return None


class Bouncer:
    """PgBouncer in front of ``cluster``: transaction pooling, ``pool_size`` server connections
    per database and user, no reset query (PgBouncer's default in transaction pooling, so what a
    client leaves on a server connection is what the next client gets), trust authentication for
    ``users``, on a free TCP port of 127.0.0.1. Runs as the ``postgres`` OS user when root
    (PgBouncer refuses to run as root). ``query_wait_timeout``: how long a client may wait for a
    server connection (PgBouncer's default 120 s)."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        pool_size: int = 8,
        users=("postgres",),
        query_wait_timeout: int = 120,
    ):
        self.cluster, self.pool_size, self.users = cluster, pool_size, tuple(users)
        self.query_wait_timeout = query_wait_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="pgeval-bouncer-"))
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> Bouncer:
        auth = self.dir / "users.txt"
        auth.write_text("".join(f'"{u}" ""\n' for u in self.users))
        ini = self.dir / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={self.cluster.dir} port={self.cluster.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {auth}\npool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nmax_client_conn = 200\n"
            f"query_wait_timeout = {self.query_wait_timeout}\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
        )
        runas: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            for f in (auth, ini):
                shutil.chown(f, "postgres", "postgres")
            runas = ["runuser", "-u", "postgres", "--"]
        self.proc = subprocess.Popen(
            [*runas, "pgbouncer", str(ini)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        import time

        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"pgbouncer did not start: {err.strip()}") from None
                time.sleep(0.1)
        raise RuntimeError("pgbouncer did not listen within 10 s")

    def dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def standby_of(primary: Cluster) -> Cluster:
    """A hot standby of ``primary``: ``pg_basebackup -R`` into a new cluster directory, started
    on its own port (streaming replication over the primary's Unix socket)."""
    standby = Cluster(primary.major)
    b = bindir(primary.major)
    standby._run(
        str(b / "pg_basebackup"),
        "-D",
        str(standby.data),
        "-R",
        "-c",
        "fast",
        "-X",
        "stream",
        "-h",
        str(primary.dir),
        "-p",
        str(primary.port),
        "-U",
        "postgres",
    )
    standby._run(
        str(b / "pg_ctl"),
        "-D",
        str(standby.data),
        "-l",
        str(standby.dir / "server.log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-p {standby.port} -k {standby.dir} -c listen_addresses='' -c hot_standby=on",
        "start",
    )
    return standby


def wait_replayed(primary: Cluster, standby: Cluster, dbname: str = "postgres") -> None:
    """Wait until ``standby`` has replayed everything ``primary`` has written so far."""
    import time

    with primary.connect(dbname=dbname) as p:
        lsn = p.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    with standby.connect(dbname=dbname) as s:
        for _ in range(300):
            done = s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]
            if done:
                return
            time.sleep(0.1)
    raise RuntimeError("the standby did not catch up within 30 s")
