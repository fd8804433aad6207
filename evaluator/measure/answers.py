"""End-to-end answers, decoupled from the LLM: import one generated answer per query of a run,
then read citation precision and answer accuracy from the SQL API (``sql/300_answers.sql``).

Input (JSONL, one object a line)::

    {"query_id": "q1", "answer": "...", "cited": ["c1", "c7"], "supported": ["c1"], "latency_ms": 812}

``cited`` and ``supported`` default to ``[]``; ``supported`` must be a subset of ``cited``;
``latency_ms`` (end-to-end time of the answer) is optional. Extra keys are ignored. The whole file
is validated before anything is written, and written in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..core import strict_json
from ..core.db import dict_rows
from ..core.errors import Conflict, InputError, param
from ..core.ids import ident
from .metrics import resolve_run


@dataclass
class Answer:
    line: int
    query_id: str
    answer: str
    cited: list[str]
    supported: list[str]
    latency_ms: float | None


@dataclass
class ImportReport:
    run: str
    file: str
    imported: int
    replaced: int = 0
    warnings: list[str] = field(default_factory=list)


def _ids(value: Any, bad: Callable[..., InputError], name: str, qid: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad(f"query '{qid}': '{name}' must be a list of chunk ids", field=name)
    out: list[str] = []
    for item in value:
        try:
            chunk = ident(item, "chunk id")  # the one rule for ids (as the test set reads them)
        except ValueError as exc:
            raise bad(
                f"query '{qid}': '{name}' holds {item!r}, not a chunk id ({exc})", field=name
            ) from None
        if chunk in out:
            raise bad(f"query '{qid}': chunk '{chunk}' is listed twice in '{name}'", field=name)
        out.append(chunk)
    return out


def parse_line(text: str, file: str, line: int) -> Answer:
    bad = partial(InputError, file=file, line=line)  # an error naming this line
    try:
        obj = strict_json.loads(text)
    except strict_json.DuplicateKey as exc:
        raise bad(str(exc), field=exc.field) from None
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise bad("each line must be a JSON object")
    qid = obj.get("query_id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == "":
        raise bad("missing or empty query id", field="query_id")
    try:
        qid = ident(qid, "query id")
    except ValueError as exc:
        raise bad(str(exc), field="query_id") from None
    answer = obj.get("answer")
    if not isinstance(answer, str):
        raise bad(f"query '{qid}': 'answer' must be a string", field="answer")
    cited = _ids(obj.get("cited"), bad, "cited", qid)
    supported = _ids(obj.get("supported"), bad, "supported", qid)
    for chunk in supported:
        if chunk not in cited:
            raise bad(
                f"query '{qid}': chunk '{chunk}' is supported but not cited", field="supported"
            )
    latency = obj.get("latency_ms")
    if latency is not None and (
        isinstance(latency, bool)
        or not isinstance(latency, (int, float))
        or latency < 0
        or latency != latency
    ):
        raise bad(
            f"query '{qid}': latency_ms must be a number >= 0, got {latency!r}", field="latency_ms"
        )
    return Answer(line, qid, answer, cited, supported, None if latency is None else float(latency))


def read_answers(path: str | Path) -> list[Answer]:
    """Parse and validate a JSONL answers file (no database needed)."""
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", file=name) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=name) from None
    out: list[Answer] = []
    seen: dict[str, int] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        a = parse_line(raw, name, no)
        if a.query_id in seen:
            raise InputError(
                f"query '{a.query_id}' already answered on line {seen[a.query_id]}",
                file=name,
                line=no,
                field="query_id",
            )
        seen[a.query_id] = no
        out.append(a)
    if not out:
        raise InputError("no answers in the file", file=name)
    return out


def import_answers(
    conn: Any, path: str | Path, run_name: str, *, replace: bool = False
) -> ImportReport:
    """Validate ``path`` against the run's test set and store its answers (all or nothing)."""
    answers = read_answers(path)
    run = resolve_run(conn, run_name)
    known = dict(
        conn.execute(
            "SELECT query_id, answerable FROM pgeval.query WHERE testset_id = %s", (run.testset_id,)
        ).fetchall()
    )
    for a in answers:
        if a.query_id not in known:
            raise InputError(
                f"query '{a.query_id}' is not in test set '{run.testset}'",
                file=str(path),
                line=a.line,
                field="query_id",
            )
    report = ImportReport(run=run.name, file=str(path), imported=len(answers))
    with conn.transaction():
        existing = conn.execute(
            "SELECT count(*) FROM pgeval.answer WHERE run_id = %s", (run.run_id,)
        ).fetchone()[0]
        if existing and not replace:
            raise Conflict(
                f"run '{run.name}' already has {existing} answers (use {param('replace', True)} to "
                "swap them for this file)"
            )
        if existing:
            conn.execute("DELETE FROM pgeval.answer WHERE run_id = %s", (run.run_id,))
            report.replaced = existing
        source = Path(path).name
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgeval.answer (run_id, query_id, answer, cited, supported, latency_ms,"
                " source_file) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (run.run_id, a.query_id, a.answer, a.cited, a.supported, a.latency_ms, source)
                    for a in answers
                ],
            )
    missing = len(known) - len(answers)
    if missing:
        report.warnings.append(
            f"{missing} queries of test set '{run.testset}' have no answer "
            "and score 0 on citation precision and answer accuracy"
        )
    s = summary(conn, run.run_id)
    if s and s["unjudged"]:
        report.warnings.append(
            f"{s['unjudged']} answerable queries have no expected facts: their "
            "answers cannot be judged and are left out of answer accuracy"
        )
    return report


def summary(conn: Any, run_id: int, refusals: list[str] | None = None) -> dict | None:
    """Counts and means of pgeval.answer_summary; None when the test set has no query."""
    rows = dict_rows(conn, "SELECT * FROM pgeval.answer_summary(%s, %s)", (run_id, refusals))
    return rows[0] if rows else None


def per_query(conn: Any, run_id: int, refusals: list[str] | None = None) -> list[dict]:
    return dict_rows(conn, "SELECT * FROM pgeval.answer_per_query(%s, %s)", (run_id, refusals))


def has_answers(conn: Any, run_id: int) -> bool:
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pgeval.answer WHERE run_id = %s)", (run_id,)
    ).fetchone()[0]


# ---- refusal phrases ---------------------------------------------------------------------------


def refusal_phrases(conn: Any) -> tuple[list[str], bool]:
    """The phrases in force and whether they are the built-in defaults."""
    custom = conn.execute("SELECT EXISTS (SELECT 1 FROM pgeval.refusal_phrase)").fetchone()[0]
    return conn.execute("SELECT pgeval.refusal_phrases()").fetchone()[0], not custom


def set_refusal_phrases(
    conn: Any, *, add: Sequence[str] = (), remove: Sequence[str] = (), reset: bool = False
) -> list[str]:
    """Edit the configured list. The first edit starts from the defaults, so `--add` extends them
    and `--remove` drops one of them; `reset` goes back to the defaults."""
    for p in add:
        if not p.strip():
            raise InputError("a refusal phrase cannot be empty", field=param("add"))
    with conn.transaction():
        if reset:
            conn.execute("DELETE FROM pgeval.refusal_phrase")
        if add or remove:
            conn.execute(
                "INSERT INTO pgeval.refusal_phrase (phrase) SELECT unnest("
                "pgeval.default_refusal_phrases()) WHERE NOT EXISTS "
                "(SELECT 1 FROM pgeval.refusal_phrase)"
            )
            current = {r[0] for r in conn.execute("SELECT phrase FROM pgeval.refusal_phrase")}
            for p in remove:
                if p not in current:
                    raise InputError(
                        f"'{p}' is not a refusal phrase in force", field=param("remove")
                    )
            conn.execute(
                "DELETE FROM pgeval.refusal_phrase WHERE phrase = ANY (%s)", (list(remove),)
            )
            conn.execute(
                "INSERT INTO pgeval.refusal_phrase (phrase) SELECT unnest(%s::text[]) "
                "ON CONFLICT DO NOTHING",
                (list(add),),
            )
            left = conn.execute("SELECT count(*) FROM pgeval.refusal_phrase").fetchone()[0]
            if not left:
                raise InputError(
                    "removing every refusal phrase would bring back the defaults; "
                    f"keep at least one (or use {param('reset')})",
                    field=param("remove"),
                )
    return refusal_phrases(conn)[0]
