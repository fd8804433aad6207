"""The server a benchmark measures on: a temporary embedded one (in a temporary folder, stopped
and removed at the end), or the one ``--dsn`` names. Either way schema pgeval is installed.

Usage::

    db, tmp, stop = _server.start(args.dsn, "pgeval-bench-")
    try:
        ...                     # tmp: a temporary folder for the benchmark's files
    finally:
        stop()
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def start(dsn: str | None, prefix: str = "pgeval-bench-"):
    """Return (Database, temporary folder, stop). Without ``dsn`` the embedded server's data
    directory is ``TMP/pgdata`` and ``PGEVAL_DATADIR`` names it, so that a ``pgeval`` process the
    benchmark starts finds the same server."""
    from evaluator.core.db import Database
    from evaluator.core.install import init

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    if not dsn:
        os.environ["PGEVAL_DATADIR"] = str(tmp / "pgdata")
        db = Database(datadir=tmp / "pgdata")
    else:
        db = Database.resolve(dsn=dsn)
    init(db)

    def stop() -> None:
        if not dsn:
            from evaluator.core import server

            server.stop(db.datadir)
        shutil.rmtree(tmp, ignore_errors=True)

    return db, tmp, stop
