"""The watchdog of a scratch build (:mod:`.build_sweep`): a build that does not return within its
timeout is cancelled, then its backend terminated (a DiskANN ``storage_layout=plain`` build at
the default 64MB was seen to hang forever after "Builder neighbor cache is full")."""

from __future__ import annotations

import threading

from ..core.db import Database

GRACE_S = 10.0


class Watchdog:
    """Cancels (then terminates) a backend that is still busy after ``timeout`` seconds."""

    def __init__(self, database: Database, pid: int, timeout: float) -> None:
        self.database, self.pid, self.timeout = database, pid, timeout
        self.fired = False
        self._timer = threading.Timer(timeout, self._fire)
        self._timer.daemon = True
        self._done = threading.Event()

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._done.set()
        self._timer.cancel()

    def _fire(self) -> None:
        if self._done.is_set():
            return
        self.fired = True
        try:
            with self.database.connect(results=False, autocommit=True) as c:
                c.execute("SELECT pg_cancel_backend(%s)", (self.pid,))
                if not self._done.wait(GRACE_S):
                    c.execute("SELECT pg_terminate_backend(%s)", (self.pid,))
        except Exception:
            pass
