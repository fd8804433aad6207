"""Warnings said once: a message goes into a result's list and on to the caller's callback the
first time only (a sweep, a grouped measurement, an advise and a probe each keep one list)."""

from __future__ import annotations

from collections.abc import Callable

Warn = Callable[[str], None]


def once(into: list[str], forward: Warn | None = None) -> Warn:
    """A ``warn(message)`` that appends ``message`` to ``into`` and calls ``forward`` with it,
    unless ``into`` already holds it."""

    def warn(message: str) -> None:
        if message not in into:
            into.append(message)
            if forward:
                forward(message)

    return warn
