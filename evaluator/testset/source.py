"""Reading a test set file line by line: UTF-8 checked per line, gzip read transparently, bytes
counted for the progress bar. Memory stays constant whatever the file size."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..core.errors import InputError


class Source:
    """One input file. Iterating yields ``(line_number, text)`` for every line (1-based), the text
    without its line ending; a line that is not valid UTF-8 raises :class:`InputError` naming it.
    A UTF-8 byte order mark on the first line is dropped."""

    def __init__(self, path: str | os.PathLike, label: str | None = None):
        self.path = Path(path)
        self.label = label or str(path)
        if not self.path.exists():
            raise InputError("no such file", file=self.label)
        if self.path.is_dir():
            raise InputError(
                "is a folder, not a file (a BEIR folder needs --format beir)", file=self.label
            )
        self.size = self.path.stat().st_size
        self._raw: BinaryIO | None = None

    @property
    def bytes_read(self) -> int:
        """Bytes of the file (compressed size for .gz) consumed so far."""
        try:
            return self._raw.tell() if self._raw is not None and not self._raw.closed else 0
        except (OSError, ValueError):
            return 0

    def error(self, message: str, line: int | None = None, field: str | None = None) -> InputError:
        return InputError(message, file=self.label, line=line, field=field)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        raw = open(self.path, "rb")
        self._raw = raw
        try:
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if self.path.suffix == ".gz" else raw
            n = 0
            try:
                for data in stream:
                    n += 1
                    try:
                        text = data.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise self.error(
                            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column "
                            f"{len(data[: exc.start].decode('utf-8', 'replace')) + 1});"
                            " save the file as UTF-8",
                            line=n,
                        ) from None
                    if n == 1 and text.startswith("\ufeff"):
                        text = text[1:]
                    if text.endswith("\n"):
                        text = text[:-2] if text.endswith("\r\n") else text[:-1]
                    yield n, text
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise self.error(f"cannot read: {exc}", line=n + 1 if n else None) from None
        finally:
            raw.close()


def format_suffix(path: Path) -> str:
    """The suffix that tells the format, ignoring a trailing .gz: 'cases.jsonl.gz' -> '.jsonl'."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""
