"""The API's captured-queries methods (`pgeval queries`): the application's own searches, read
from PostgreSQL's log (evaluator/captured/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..captured.store import CaptureReport
    from ..core.db import Database


class CapturedMethods:
    database: Database

    def capture_queries(
        self,
        logs: list[str],
        *,
        target: str,
        name: str,
        log_format: str = "auto",
        log_line_prefix: str | None = None,
        since: str | None = None,
        until: str | None = None,
        max: int | None = None,
        append: bool = False,
        replace: bool = False,
    ) -> CaptureReport:
        """Read server logs, keep the searches of ``target``, store them as set ``name``
        (`pgeval queries capture`). ``log_line_prefix``: the server's, read from it when None."""
        from ..captured.store import capture

        return capture(
            self.database,
            list(logs),
            target=target,
            name=name,
            fmt=log_format,
            prefix=log_line_prefix,
            since=since,
            until=until,
            max_queries=max,
            append=append,
            replace=replace,
        )

    def captured_sets(self) -> list[dict]:
        """The captured sets with their counts (`pgeval queries list`)."""
        from ..captured.store import list_sets

        return list_sets(self.database)

    def captured_set(self, name: str) -> dict:
        """A captured set: its shapes, their filter values and the captures (`queries show`)."""
        from ..captured.store import show

        return show(self.database, name)

    def delete_captured(self, name: str) -> None:
        """Delete a captured set (`pgeval queries delete`)."""
        from ..captured.store import delete

        delete(self.database, name)

    def export_captured(self, name: str, path: str, *, shape: int | None = None) -> int:
        """Write a set's vectors to ``path`` (.npy or JSONL); returns the queries written."""
        from ..captured.store import export

        return export(self.database, name, path, shape=shape)

    def measure_captured(
        self,
        name: str,
        settings: Any,
        *,
        sweep: str | None = None,
        replace: bool = False,
        target_recall: float = 0.95,
    ) -> dict:
        """Each shape of set ``name`` measured as the application sent it, over the settings
        grid (``pgeval.evaluate_captured``): ``rows``, one per shape and point, with the recall
        weighted by each shape's share of the searches; ``verdict``, the first point where every
        shape reaches ``target_recall``, or the shapes that reach it nowhere and their best
        (`pgeval queries measure`)."""
        from ..tuning.captured import measure

        return measure(
            self.database, name, settings, sweep=sweep, replace=replace, target_recall=target_recall
        )
