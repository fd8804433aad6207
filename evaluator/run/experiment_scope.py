"""An experiment while its stages run: an advisory lock that says "a live process has it" (held
by a connection of its own in an open transaction: a killed client's session ends, and its lock
with it), its end state (``complete``, or
``failed`` when anything escapes), and the one-line error that says how to resume it. Used by
:mod:`evaluator.run.pipeline` and :mod:`evaluator.run.resume`."""

from __future__ import annotations

import os
import socket
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from ..core.errors import Conflict, DatabaseError, InputError, PgevalError, first_line, param
from ..core.held_lock import HeldLock

LOCK_CLASS = 1885824374  # 'pgev': first key of the experiment's advisory lock
DEAD_HOLDER_WAIT_S = 60.0  # how long resume waits for a dead client's session to end


def _key(exp_id: int) -> tuple[int, int]:
    return LOCK_CLASS, int(exp_id) % 2147483647


def try_lock(conn: Any, exp_id: int) -> bool:
    """Take the experiment's advisory lock, held until :func:`unlock` or until this process ends
    (:class:`evaluator.core.held_lock.HeldLock`: a transaction of its own, safe behind a
    transaction pooler, where a session lock would stay on a pooled server connection). Taken
    twice for one connection, it nests: as many unlocks release it."""
    held = _locks(conn)
    if exp_id in held:
        held[exp_id][1] += 1
        return True
    lock = HeldLock(conn, _key(exp_id))
    if not lock.acquire(wait=False):
        return False
    held[exp_id] = [lock, 1]
    return True


def unlock(conn: Any, exp_id: int) -> None:
    held = _locks(conn)
    entry = held.get(exp_id)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del held[exp_id]
        entry[0].release()


# per connection, {experiment id: [its HeldLock, how many times taken]}; weakly keyed, nothing is
# set on the connection, and the entry goes with it
_HELD: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def _locks(conn: Any) -> dict:
    return _HELD.setdefault(conn, {})


def commit(conn: Any) -> None:
    """Commit unless the connection is in autocommit mode."""
    if not conn.autocommit:
        conn.commit()


def _mark(conn: Any, exp_id: int, status: str) -> bool:
    """Set the experiment's end state; False when it no longer exists."""
    n = conn.execute(
        "UPDATE pgeval.experiment SET status = %s, finished_at = now() WHERE experiment_id = %s",
        (status, exp_id),
    ).rowcount
    commit(conn)
    return n > 0


def stopped(exc: BaseException, name: str) -> PgevalError | None:
    """The error to show when experiment ``name`` stopped on ``exc``, saying how to resume;
    None for an interrupt (Ctrl-C)."""
    import psycopg

    hint = f"; the experiment is left resumable: `pgeval run resume {name}`"
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    first = first_line(exc)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return DatabaseError(
            f"a statement ran past the statement timeout ({first}){hint} {param('statement_timeout')} LONGER"
        )
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(
            f"lost the database connection ({first}){hint} once the server is back"
        )
    if isinstance(exc, psycopg.Error):
        return DatabaseError(
            f"the database refused a statement ({first}){hint} once the cause is fixed"
        )
    if isinstance(exc, InputError):
        return InputError(exc.detail + hint, file=exc.file, line=exc.line, field=exc.field_ref)
    if isinstance(exc, PgevalError):
        try:
            return exc.__class__(f"{Exception.__str__(exc)}{hint}")  # parameters stay references
        except TypeError:
            return None
    return None


def _testset_of(conn: Any, exp_id: int) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT t.testset_id, t.name FROM pgeval.experiment e JOIN pgeval.testset t "
        "USING (testset_id) WHERE e.experiment_id = %s",
        (exp_id,),
    ).fetchone()
    commit(conn)
    return row


def deleted_under(
    conn: Any, exp_id: int, name: str, testset: tuple[int, str] | None
) -> PgevalError | None:
    """When experiment ``exp_id`` no longer exists (its test set was replaced or deleted by
    another session while it ran: the delete cascades to the experiment and its runs), the error
    that says so — nothing is left to resume; else None."""
    if (
        conn.execute(
            "SELECT 1 FROM pgeval.experiment WHERE experiment_id = %s", (exp_id,)
        ).fetchone()
        is not None
    ):
        commit(conn)
        return None
    now = (
        None
        if testset is None
        else conn.execute(
            "SELECT testset_id FROM pgeval.testset WHERE name = %s", (testset[1],)
        ).fetchone()
    )
    commit(conn)
    if testset is None or (now is not None and now[0] == testset[0]):
        why = "another session deleted it while it ran"
    elif now is None:
        why = (
            f"another session deleted its test set '{testset[1]}' while it ran (`pgeval "
            "testset delete` deletes the test set's experiments and runs)"
        )
    else:
        why = (
            f"another session replaced its test set '{testset[1]}' while it ran (`pgeval "
            "testset load --replace` deletes the old test set's experiments and runs)"
        )
    return Conflict(
        f"experiment '{name}' stopped: {why}; nothing is left to resume: run the "
        f"pipeline again (the name '{name}' is free)"
    )


@contextmanager
def experiment_scope(
    results: Any, exp_id: int, name: str, on_warning: Callable[..., Any] | None = None
) -> Iterator[Any]:
    """Hold experiment ``exp_id``'s lock while its stages run; mark it ``complete`` at the end,
    or ``failed`` when anything escapes (re-raised as a one-line error saying how to resume —
    or, when the experiment was deleted under it, saying so and suggesting no resume)."""
    if not try_lock(results, exp_id):
        raise Conflict(busy_message(results, exp_id, name))
    testset = _testset_of(results, exp_id)
    try:
        yield
    except BaseException as exc:
        gone = None
        try:
            if results.info.transaction_status != 0:
                results.rollback()
            if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
                gone = deleted_under(results, exp_id, name, testset)
            if gone is None:
                _mark(results, exp_id, "failed")
        except Exception:  # the connection is gone: the experiment stays 'running'
            pass
        unlock(results, exp_id)
        if gone is not None:
            raise gone from None
        if isinstance(exc, KeyboardInterrupt) and on_warning:
            on_warning(
                f"interrupted: experiment '{name}' is left resumable: `pgeval run resume {name}`"
            )
        better = stopped(exc, name)
        if better is None:
            raise
        raise better from None
    if not _mark(results, exp_id, "complete"):
        unlock(results, exp_id)
        raise deleted_under(results, exp_id, name, testset) or Conflict(
            f"experiment '{name}' was deleted by another session while it ran"
        )
    unlock(results, exp_id)


def busy_message(conn: Any, exp_id: int, name: str) -> str:
    row = conn.execute(
        "SELECT name, pid, host, round(extract(epoch FROM now() - heartbeat_at)) FROM pgeval.run "
        "WHERE experiment_id = %s AND status = 'running' ORDER BY run_id DESC LIMIT 1",
        (exp_id,),
    ).fetchone()
    commit(conn)
    who = (
        ""
        if row is None or row[1] is None
        else (
            f": run '{row[0]}' is written by pid {row[1]} on {row[2]}, last write "
            f"{int(row[3] or 0)} s ago"
        )
    )
    return (
        f"experiment '{name}' is being run by another pgeval process{who} (wait for it, or "
        "stop that process, then resume)"
    )


# ---- a client that is gone, and its sessions that live on ------------------------------------
# The experiment's lock ends with its client's connections (a held transaction, see try_lock),
# but a statement the client had sent runs on in its backend until it ends (blocked on a lock,
# say) and would then write beside the resume. The stage writer's transactions name their client
# in application_name (SET LOCAL; evaluator.core.db.client_name), so those backends are found by
# name: never an idle pooled connection, nor anyone else's session.


def _running_client(conn: Any, exp_id: int) -> tuple[int | None, str | None]:
    """(pid, host) of the client recorded with the experiment's running run."""
    row = conn.execute(
        "SELECT r.pid, r.host FROM pgeval.run r WHERE r.experiment_id = %s "
        "AND r.status = 'running' ORDER BY r.run_id DESC LIMIT 1",
        (exp_id,),
    ).fetchone()
    commit(conn)
    return (None, None) if row is None else (row[0], row[1])


def _live_sessions(conn: Any, pid: int, host: str) -> list[dict]:
    """The backends of client ``pid`` on ``host`` still running a statement (or in a
    transaction); their state is NULL where this role may not see it."""
    from ..core.db import client_name

    rows = conn.execute(
        "SELECT pid, state, wait_event_type FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid() "
        "AND state IS DISTINCT FROM 'idle' ORDER BY pid",
        (client_name(pid, host),),
    ).fetchall()
    commit(conn)
    return [{"backend": r[0], "state": r[1], "waiting": r[2]} for r in rows]


def _holder(conn: Any, exp_id: int) -> dict | None:
    """The session holding experiment ``exp_id``'s lock (its backend in pg_stat_activity)."""
    row = conn.execute(
        """SELECT l.pid, a.state, a.wait_event_type
             FROM pg_locks l LEFT JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %(c)s::oid
              AND l.objid = %(k)s::oid AND l.objsubid = 2
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            LIMIT 1""",
        {"c": LOCK_CLASS, "k": _key(exp_id)[1]},
    ).fetchone()
    commit(conn)
    return None if row is None else {"backend": row[0], "state": row[1], "waiting": row[2]}


def client_gone(pid: int | None, host: str | None) -> bool:
    """True when the pgeval process ``pid`` ran on this host and has ended (or is a zombie).
    A process on another host cannot be checked: False."""
    if pid is None or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    try:  # a killed child not yet reaped by its parent
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def acquire(
    conn: Any,
    exp_id: int,
    name: str,
    on_warning: Callable[..., Any] | None = None,
    wait_s: float = DEAD_HOLDER_WAIT_S,
) -> None:
    """Take experiment ``exp_id``'s lock. Held by a live process: a Conflict at once. When the
    client that ran it is gone but one of its sessions still runs a statement (``kill -9``: its
    backend lives on until the statement ends), say so, end that backend when this role may
    (pg_terminate_backend; its transaction rolls back, so nothing half-written stays), and wait
    for it up to ``wait_s`` seconds."""
    pid, host = _running_client(conn, exp_id)
    gone = client_gone(pid, host)
    if not try_lock(conn, exp_id):
        if not gone:
            raise Conflict(busy_message(conn, exp_id, name))
        holder = _holder(conn, exp_id)
        if holder is not None:  # the client is gone: its lock ends with its connections
            _end_sessions(conn, name, pid, host, [holder], on_warning, wait_s)
        if not _wait(lambda: try_lock(conn, exp_id), wait_s):
            raise Conflict(busy_message(conn, exp_id, name))
    if gone:
        assert pid is not None and host is not None  # client_gone says so
        live = _live_sessions(conn, pid, host)
        if live:
            try:
                _end_sessions(conn, name, pid, host, live, on_warning, wait_s)
            except BaseException:
                unlock(conn, exp_id)
                raise


def _wait(cond: Callable[[], bool], wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _ended(conn: Any, backend: int) -> bool:
    row = conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,)).fetchone()
    commit(conn)
    return row is None


def _end_sessions(
    conn: Any,
    name: str,
    pid: int | None,
    host: str | None,
    sessions: Any,
    on_warning: Callable[..., Any] | None,
    wait_s: float,
) -> None:
    """End (or wait for) the sessions of the gone client ``pid`` on ``host``."""
    import psycopg

    for session in sessions:
        backend = session["backend"]
        what = (
            f"the pgeval process that ran experiment '{name}' (pid {pid} on {host}) is gone, "
            f"but its database session (backend pid {backend}, "
            f"{session['state'] or 'its state hidden from this role'}"
            + (f", waiting on a {session['waiting']}" if session["waiting"] else "")
            + ") still holds the experiment until its current statement ends"
        )
        try:
            ended = conn.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone()[0]
            commit(conn)
            action = "ended that session" if ended else "waiting for it"
        except psycopg.errors.InsufficientPrivilege:
            conn.rollback()
            action = f"waiting for it (up to {wait_s:g} s)"
        if on_warning:
            on_warning(f"{what}: {action}")

        if not _wait(partial(_ended, conn, backend), wait_s):
            raise Conflict(
                f"{what}, and did not end within {wait_s:g} s: retry later, or have a "
                f"superuser end it: SELECT pg_terminate_backend({backend})"
            )
