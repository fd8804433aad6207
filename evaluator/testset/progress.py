"""Progress of a big test set load on stderr (bytes read, then the SQL phases): a rich bar on a
terminal, else one line at most every ``PGEVAL_PROGRESS_INTERVAL`` seconds (the display of
:mod:`evaluator.core.progress`, which the sweep and `run import` use too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .source import Source

BIG = 4 << 20  # files smaller than this load too fast for a bar to help


class LoadProgress:
    def __init__(self, sources: list[Source], enabled: bool) -> None:
        self.sources = sources
        self.total = sum(s.size for s in sources)
        self.enabled = bool(enabled) and self.total >= BIG
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> LoadProgress:
        if self.enabled:
            from ..core.progress import progress_bar

            self._bar = progress_bar(transient=True, unit="bytes")
            self._bar.start()
            self._task = self._bar.add_task("reading", total=self.total)
        return self

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=sum(s.bytes_read for s in self.sources))

    def phase(self, description: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=description, completed=self.total)

    def __exit__(self, *exc: object) -> Literal[False]:
        if self._bar is not None:
            self._bar.stop()
        return False
