"""A probe's connections, opened once and lent again (:class:`Lending`).

A probe goes through the same code as a sweep (target, query set, sweep, probe row, advice), and
each of those steps opens its own connection: eleven per probe, about 6 ms each, a third of a
probe's own cost on a small table. :class:`Lending` is a :class:`~evaluator.core.db.Database`
whose ``connect()`` lends a connection of the same kind (results or knowledge base, autocommit,
read only) that an earlier step gave back, else opens one. Giving it back is what the step did
before: ``with ... as conn:`` commits (rolls back on an exception), then ``close()``; ``close()``
here rolls back whatever is still open (what closing did: the server dropped it), puts the
connection's characteristics back and keeps it for the next step. A connection is lent to one
step at a time: a step that asks while another holds one of that kind gets a new one.
:meth:`Lending.close_all` closes them for good at the end of the probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.db import Database
from ...core.pool_safe import PoolSafeConnection


class _Lent(PoolSafeConnection):
    """A connection of a :class:`Lending`: ``close()`` gives it back."""

    _pgeval_lending: Any  # (the Lending, its kind)

    def close(self) -> None:
        lending, kind = self._pgeval_lending
        if self.closed or self.broken or lending is None:
            PoolSafeConnection.close(self)
            return
        try:
            if self.pgconn.transaction_status != 0:  # closing dropped it: so does giving back
                self.rollback()
            results, autocommit, read_only = kind
            self.autocommit = autocommit
            self.read_only = True if read_only else None  # (Database.connect's)
            self.isolation_level = None
            self.deferrable = None
        except Exception:
            PoolSafeConnection.close(self)
            return
        lending.free.setdefault(kind, []).append(self)

    def close_for_good(self) -> None:
        self._pgeval_lending = (None, None)
        PoolSafeConnection.close(self)


@dataclass
class Lending(Database):
    """``database``'s connections, lent again (module docstring)."""

    free: dict = field(default_factory=dict, repr=False)
    opened: list = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, database: Database) -> Lending:
        return cls(
            dsn=database.dsn,
            datadir=database.datadir,
            results_dsn=database.results_dsn,
            source=database.source,
        )

    def connect(
        self,
        *,
        results: bool = True,
        autocommit: bool = False,
        read_only: bool = False,
        **kwargs: Any,
    ) -> Any:
        kind = (results, autocommit, read_only)
        if kwargs:  # other connection parameters: a connection of its own, not lent
            return super().connect(
                results=results, autocommit=autocommit, read_only=read_only, **kwargs
            )
        free = self.free.get(kind) or []
        while free:
            conn = free.pop()
            if not conn.closed and not conn.broken:
                return conn
        conn = super().connect(results=results, autocommit=autocommit, read_only=read_only)
        conn.__class__ = _Lent
        conn._pgeval_lending = (self, kind)
        self.opened.append(conn)
        return conn

    def close_all(self) -> None:
        for conn in self.opened:
            conn.close_for_good()
        self.opened.clear()
        self.free.clear()

    def __enter__(self) -> Lending:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
