"""Where an advise's time goes (issue "advise on a million rows in minutes", item 6): a ledger of
seconds per kind of work (``ground_truth``, ``copies``, ``builds``), charged by the code that
does the work (:func:`charge`: the exact ground truth of a sweep's session, a scratch or sample
copy, an index build) while a ledger is open (:func:`ledger`). Outside one, charging costs
nothing. The ledger is a context variable: work on another thread is not charged to it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

KINDS = ("ground_truth", "copies", "builds")

_OPEN: ContextVar[dict[str, float] | None] = ContextVar("pgeval_spent", default=None)


@contextmanager
def ledger() -> Iterator[dict[str, float]]:
    """A ledger of seconds per kind, filled while the block runs (nested: the outer one's)."""
    outer = _OPEN.get()
    if outer is not None:
        yield outer
        return
    book = dict.fromkeys(KINDS, 0.0)
    token = _OPEN.set(book)
    try:
        yield book
    finally:
        _OPEN.reset(token)


@contextmanager
def charge(kind: str) -> Iterator[None]:
    """The block's seconds charged to ``kind`` of the open ledger (none open: not counted).
    A charge inside another of the same kind is counted once (the outer one)."""
    book = _OPEN.get()
    if book is None or book.get(f"_{kind}_open"):
        yield
        return
    book[f"_{kind}_open"] = 1.0
    t0 = time.perf_counter()
    try:
        yield
    finally:
        book[kind] = book.get(kind, 0.0) + time.perf_counter() - t0
        del book[f"_{kind}_open"]


def split(book: dict[str, float], total: float) -> dict[str, float]:
    """The ledger as printed: seconds per kind, ``measuring`` the rest of ``total``."""
    out = {k: round(book.get(k, 0.0), 3) for k in KINDS}
    out["measuring"] = round(max(total - sum(out.values()), 0.0), 3)
    out["total"] = round(total, 3)
    return out
