"""Reading a test set file line by line: UTF-8 checked per line, gzip read transparently, bytes
counted for the progress bar. Memory stays constant whatever the file size."""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..core.errors import InputError, param


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
                f"is a folder, not a file (a BEIR folder needs {param('format')} beir)",
                file=self.label,
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

    def text(self, data: bytes, n: int) -> str:
        """Line ``n`` (bytes, with or without its line ending) as text without its line ending;
        :class:`InputError` naming the line and column when it is not valid UTF-8."""
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
        return text

    def _open(self) -> io.BufferedIOBase:
        raw = open(self.path, "rb")
        self._raw = raw
        return gzip.GzipFile(fileobj=raw, mode="rb") if self.path.suffix == ".gz" else raw

    def __iter__(self) -> Iterator[tuple[int, str]]:
        stream = self._open()
        n = 0
        try:
            for data in stream:
                n += 1
                yield n, self.text(data, n)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise self.error(f"cannot read: {exc}", line=n + 1 if n else None) from None
        finally:
            self._close(stream)

    def nonblank(self, empty: str) -> Iterator[tuple[int, str]]:
        """The lines that are not blank, as iterating yields them; ``empty`` the error when the
        file has none (raised once the file is read)."""
        count = 0
        for n, text in self:
            if text.strip():
                count += 1
                yield n, text
        if count == 0:
            raise self.error(empty)

    def blocks(self, size: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
        """The file as ``(number of the first line, bytes)`` blocks of about ``size`` bytes, each
        made of whole lines, each line ending with ``\\n`` (one is added to a last line that has
        none). The bytes are not decoded: a reader decodes them (see :meth:`text`)."""
        stream = self._open()
        line, pending = 1, []  # pending: the start of a line not yet ended
        try:
            while data := stream.read(size):
                cut = data.rfind(b"\n") + 1
                if not cut:
                    pending.append(data)
                    continue
                block = b"".join([*pending, data[:cut]]) if pending else data[:cut]
                pending = [data[cut:]] if cut < len(data) else []
                yield line, block
                line += block.count(b"\n")
            if pending:
                yield line, b"".join(pending) + b"\n"
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise self.error(f"cannot read: {exc}", line=line if line > 1 else None) from None
        finally:
            self._close(stream)

    def _close(self, stream: io.BufferedIOBase) -> None:
        if stream is not self._raw:
            stream.close()
        if self._raw is not None:
            self._raw.close()


def format_suffix(path: Path) -> str:
    """The suffix that tells the format, ignoring a trailing .gz: 'cases.jsonl.gz' -> '.jsonl'."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""
