"""The one answer to "no run of that name": what the name is instead, when it is something.

Runs are named ``{experiment}.{stage}.{repetition}``; a user who types an experiment's or a
sweep's name where a run is asked for is told so, with the runs it holds and the command that
reads the whole of it, instead of being sent to `pgeval run list`.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import NotFound


def no_such_run(conn: Any, name: str) -> NotFound:
    """The NotFound to raise when no run is named ``name``."""
    row = conn.execute(
        "SELECT e.name, (SELECT array_agg(r.name ORDER BY r.run_id) FROM "
        "(SELECT name, run_id FROM pgeval.run WHERE experiment_id = e.experiment_id "
        "ORDER BY run_id LIMIT 3) r), "
        "(SELECT count(*) FROM pgeval.run WHERE experiment_id = e.experiment_id) "
        "FROM pgeval.experiment e WHERE e.name = %s",
        (name,),
    ).fetchone()
    if row is None:
        return NotFound(f"no run named '{name}' (see `pgeval run list`)")
    runs = ", ".join(row[1] or [])
    more = f", … ({row[2]} runs)" if row[2] > 3 else ""
    return NotFound(
        f"'{name}' is an experiment, not a run: its runs are {runs or 'none yet'}{more} "
        f"(`pgeval stage-report {name}` reads them all)"
    )
