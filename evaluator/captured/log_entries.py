"""PostgreSQL server log files read into entries: one message with its DETAIL.

Three formats (``log_destination``): ``stderr`` (each line begins with the server's
``log_line_prefix``; a message's next lines begin with a tab; its DETAIL is a line of its own
with the same prefix), ``csvlog`` and ``jsonlog`` (one record a message, DETAIL a field). Plain
or gzip (``.gz``). The format is told by the file's name (``.csv``, ``.json``) or its first line.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO

from ..core.errors import InputError, param

FORMATS = ("auto", "stderr", "csvlog", "jsonlog")
DEFAULT_PREFIX = "%m [%p] "  # PostgreSQL's default log_line_prefix

# log_line_prefix escapes (PostgreSQL docs, "What to Log"): the ones a reader needs are captured
_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
_ESCAPES = {
    "m": rf"(?P<time>{_STAMP}\.\d+(?: [^ \]]+)?)",
    "t": rf"(?P<time>{_STAMP}(?: [^ \]]+)?)",
    "n": r"(?P<epoch>\d+(?:\.\d+)?)",
    "p": r"(?P<pid>\d+)",
    "c": r"(?P<session>[0-9a-f]+\.[0-9a-f]+)",
    "u": r"(?P<user>.*?)",
    "d": r"(?P<db>.*?)",
    "s": rf"{_STAMP}(?: [^ \]]+)?",
    "l": r"\d+",
    "e": r"[0-9A-Z]{5}",
    "x": r"\d*",
    "Q": r"-?\d*",
    "P": r"\d*",
}
_SEVERITY = r"(?P<severity>DEBUG\d?|LOG|INFO|NOTICE|WARNING|ERROR|FATAL|PANIC|DETAIL|HINT|"
_SEVERITY += r"CONTEXT|STATEMENT|QUERY|LOCATION):  "
_ZONE = re.compile(r"^(?P<stamp>\S+ \S+)(?: (?P<zone>\S+))?$")
# csvlog's columns (PostgreSQL 14+; 13 has the same first 23)
_CSV = {"time": 0, "user": 1, "db": 2, "pid": 3, "session": 5, "severity": 11, "message": 13}
_CSV_DETAIL = 14


@dataclass(frozen=True)
class Entry:
    """One log message: where it starts (``file:line``), when, which backend, its text."""

    where: str
    time: datetime | None
    process: str
    severity: str
    message: str
    detail: str | None = None
    user: str | None = None


def parse_time(text: str | None) -> datetime | None:
    """A log timestamp (``2026-12-07 08:46:55.988 UTC``); a zone other than UTC, GMT or a
    numeric offset leaves it naive (compared as written)."""
    if not text:
        return None
    m = _ZONE.match(text.strip())
    if m is None:
        return None
    try:
        when = datetime.fromisoformat(m["stamp"])
    except ValueError:
        return None
    zone = m["zone"]
    if zone in ("UTC", "GMT", "Z"):
        return when.replace(tzinfo=timezone.utc)
    if zone and re.fullmatch(r"[+-]\d\d(:?\d\d)?", zone):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:]) if len(digits) > 2 else 0)
        return when.replace(tzinfo=timezone(sign * timedelta(minutes=minutes)))
    return when


def prefix_pattern(prefix: str) -> re.Pattern[str]:
    """The regular expression of a line that begins with ``prefix`` (``log_line_prefix``),
    followed by the severity. ``%q`` (nothing after it for non-session processes) makes the
    rest of the prefix optional; an escape with padding (``%-10u``) matches padded."""
    out: list[str] = []
    optional_from: int | None = None
    i = 0
    while i < len(prefix):
        ch = prefix[i]
        if ch != "%" or i + 1 >= len(prefix):
            out.append(re.escape(ch))
            i += 1
            continue
        m = re.match(r"%(-?\d+)?(.)", prefix[i:])
        assert m is not None
        pad, esc = m.group(1), m.group(2)
        i += len(m.group(0))
        if esc == "%":
            out.append("%")
        elif esc == "q":
            optional_from = len(out)
        else:
            piece = _ESCAPES.get(esc, r".*?")
            if piece.startswith("(?P<") and piece in out:  # a repeated escape: no second group
                piece = re.sub(r"\(\?P<\w+>", "(?:", piece)
            out.append(rf"\s*{piece}\s*" if pad else piece)
    if optional_from is not None:
        out[optional_from:] = ["(?:" + "".join(out[optional_from:]) + ")?"]
    return re.compile("^" + "".join(out) + _SEVERITY)


def _open(path: Path) -> IO[str]:
    raw = path.open("rb")
    head = raw.read(2)
    raw.seek(0)
    stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[assignment]
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")


def _format_of(path: Path, first: str) -> str:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".json"):
        return "jsonlog"
    if name.endswith(".csv"):
        return "csvlog"
    if first.lstrip().startswith("{"):
        return "jsonlog"
    if re.match(rf"{_STAMP}(\.\d+)?( \S+)?,", first):
        return "csvlog"
    return "stderr"


def read(paths: list[str], fmt: str = "auto", prefix: str = DEFAULT_PREFIX) -> Iterator[Entry]:
    """Every entry of the files, in order. A file that cannot be read, or a line no format
    explains, is one error naming the file and line."""
    pattern = prefix_pattern(prefix)
    for name in paths:
        path = Path(name)
        try:
            f = _open(path)
            first = f.readline()  # (tells the format; read once, then the rest)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(
                f"cannot read it: {getattr(exc, 'strerror', None) or exc}", file=name
            ) from None
        kind = _format_of(path, first) if fmt == "auto" else fmt
        with f:
            lines = itertools.chain([first], f)
            try:
                if kind == "jsonlog":
                    yield from _jsonlog(lines, name)
                elif kind == "csvlog":
                    yield from _csvlog(lines, name)
                else:
                    yield from _stderr(lines, name, pattern, prefix)
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise InputError(f"cannot read it: {exc}", file=name) from None


def _stderr(f: Iterable[str], name: str, pattern: re.Pattern[str], prefix: str) -> Iterator[Entry]:
    """Lines with the prefix begin a message (DETAIL: the last message's detail); a line that
    begins with a tab continues the message before it."""
    current: dict | None = None
    details: dict[str, dict] = {}  # the last LOG message of each process, for its DETAIL
    for no, line in enumerate(f, 1):
        line = line.rstrip("\r\n")
        m = pattern.match(line)
        if m is None:
            if current is not None and line.startswith("\t"):
                current["text"].append(line[1:])
                continue
            if current is None and not line.strip():
                continue
            if current is not None and not line.strip():
                current["text"].append("")
                continue
            raise InputError(
                f"a line that neither begins with the log_line_prefix '{prefix}' nor continues "
                f"a message (give the server's prefix with {param('log_line_prefix')}, or the "
                "log's format)",
                file=name,
                line=no,
            )
        if current is not None:
            yield from _flush(current, details)
        groups = m.groupdict()
        process = groups.get("pid") or groups.get("session") or ""
        when = groups.get("time")
        stamp: datetime | None
        if when is None and groups.get("epoch"):
            stamp = datetime.fromtimestamp(float(groups["epoch"]), timezone.utc)
        else:
            stamp = parse_time(when)
        current = {
            "where": f"{name}:{no}",
            "time": stamp,
            "process": process,
            "severity": groups["severity"],
            "text": [line[m.end() :]],
            "user": groups.get("user"),
        }
    if current is not None:
        yield from _flush(current, details)
    for pending in details.values():
        yield _entry(pending, None)


def _flush(current: dict, pending: dict[str, dict]) -> Iterator[Entry]:
    """A message is given out once the next line of its process shows whether a DETAIL
    follows it."""
    key = current["process"]
    if current["severity"] == "DETAIL":
        before = pending.pop(key, None)
        if before is not None:
            yield _entry(before, "\n".join(current["text"]))
        return
    if key in pending:
        yield _entry(pending.pop(key), None)
    if current["severity"] == "LOG":
        pending[key] = current
    else:
        yield _entry(current, None)


def _entry(d: dict, detail: str | None) -> Entry:
    return Entry(
        d["where"], d["time"], d["process"], d["severity"], "\n".join(d["text"]), detail, d["user"]
    )


def _csvlog(f: Iterable[str], name: str) -> Iterator[Entry]:
    reader = csv.reader(f)
    for row in reader:
        if len(row) <= _CSV_DETAIL:
            raise InputError(
                f"a csvlog record has {len(row)} fields, PostgreSQL writes at least 23",
                file=name,
                line=reader.line_num,
            )
        yield Entry(
            f"{name}:{reader.line_num}",
            parse_time(row[_CSV["time"]]),
            row[_CSV["pid"]] or row[_CSV["session"]],
            row[_CSV["severity"]],
            row[_CSV["message"]],
            row[_CSV_DETAIL] or None,
            row[_CSV["user"]] or None,
        )


def _jsonlog(f: Iterable[str], name: str) -> Iterator[Entry]:
    for no, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not a jsonlog record: {exc.msg}", file=name, line=no) from None
        if not isinstance(rec, dict) or "message" not in rec:
            raise InputError("not a jsonlog record: no message", file=name, line=no)
        yield Entry(
            f"{name}:{no}",
            parse_time(rec.get("timestamp")),
            str(rec.get("pid") or rec.get("session_id") or ""),
            str(rec.get("error_severity") or ""),
            str(rec["message"]),
            rec.get("detail"),
            rec.get("user"),
        )
