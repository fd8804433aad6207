"""An experiment while its stages run: a session advisory lock that says "a live process has
it" (a killed client's session ends, and its lock with it), its end state (``complete``, or
``failed`` when anything escapes), and the one-line error that says how to resume it. Used by
:mod:`evaluator.pipeline` and :mod:`evaluator.resume`."""

from __future__ import annotations

from contextlib import contextmanager

from .errors import Conflict, DatabaseError, InputError, PgevalError, first_line

LOCK_CLASS = 1885824374          # 'pgev': first key of the experiment's advisory lock


def _key(exp_id: int) -> tuple[int, int]:
    return LOCK_CLASS, int(exp_id) % 2147483647


def try_lock(conn, exp_id: int) -> bool:
    """Take the experiment's session advisory lock (held until unlock or disconnect)."""
    ok = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", _key(exp_id)).fetchone()[0]
    commit(conn)
    return bool(ok)


def unlock(conn, exp_id: int) -> None:
    try:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", _key(exp_id))
        commit(conn)
    except Exception:  # the connection is gone, and the lock with it
        pass


def commit(conn) -> None:
    """Commit unless the connection is in autocommit mode."""
    if not conn.autocommit:
        conn.commit()


def _mark(conn, exp_id: int, status: str) -> None:
    conn.execute("UPDATE pgeval.experiment SET status = %s, finished_at = now() "
                 "WHERE experiment_id = %s", (status, exp_id))
    commit(conn)


def stopped(exc: BaseException, name: str) -> PgevalError | None:
    """The error to show when experiment ``name`` stopped on ``exc``, saying how to resume;
    None for an interrupt (Ctrl-C)."""
    import psycopg

    hint = f"; the experiment is left resumable: `pgeval run resume {name}`"
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    first = first_line(exc)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return DatabaseError(f"a statement ran past the statement timeout ({first}){hint} "
                             "--statement-timeout LONGER")
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"lost the database connection ({first}){hint} once the server is "
                             "back")
    if isinstance(exc, psycopg.Error):
        return DatabaseError(f"the database refused a statement ({first}){hint} once the cause "
                             "is fixed")
    if isinstance(exc, InputError):
        return InputError(exc.detail + hint, file=exc.file, line=exc.line, field=exc.field)
    if isinstance(exc, PgevalError):
        try:
            return exc.__class__(f"{exc}{hint}")
        except TypeError:
            return None
    return None


@contextmanager
def experiment_scope(results, exp_id: int, name: str, on_warning=None):
    """Hold experiment ``exp_id``'s lock while its stages run; mark it ``complete`` at the end,
    or ``failed`` when anything escapes (re-raised as a one-line error saying how to resume)."""
    if not try_lock(results, exp_id):
        raise Conflict(busy_message(results, exp_id, name))
    try:
        yield
    except BaseException as exc:
        try:
            if results.info.transaction_status != 0:
                results.rollback()
            _mark(results, exp_id, "failed")
        except Exception:  # the connection is gone: the experiment stays 'running'
            pass
        unlock(results, exp_id)
        if isinstance(exc, KeyboardInterrupt) and on_warning:
            on_warning(f"interrupted: experiment '{name}' is left resumable: "
                       f"`pgeval run resume {name}`")
        better = stopped(exc, name)
        if better is None:
            raise
        raise better from None
    _mark(results, exp_id, "complete")
    unlock(results, exp_id)


def busy_message(conn, exp_id: int, name: str) -> str:
    row = conn.execute(
        "SELECT name, pid, host, round(extract(epoch FROM now() - heartbeat_at)) FROM pgeval.run "
        "WHERE experiment_id = %s AND status = 'running' ORDER BY run_id DESC LIMIT 1",
        (exp_id,)).fetchone()
    commit(conn)
    who = "" if row is None or row[1] is None else (
        f": run '{row[0]}' is written by pid {row[1]} on {row[2]}, last write "
        f"{int(row[3] or 0)} s ago")
    return (f"experiment '{name}' is being run by another pgeval process{who} (wait for it, or "
            "stop that process, then resume)")
