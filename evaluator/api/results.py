"""The types the API's methods return and hand to their callbacks, by one name each, for the
annotations of a front end (the command line imports them here, never around the API)."""

from __future__ import annotations

from ..dba.sweep import SweepResult
from ..dba.sweep.grid import Point
from ..dba.sweep.groups import GroupSweepResult
from ..target.groups import Group

__all__ = ["Group", "GroupSweepResult", "Point", "SweepResult"]
