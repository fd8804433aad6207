"""The JSON report of a run (or of an experiment's final stage): every number read from the SQL API
(pgeval.summary, per_query, run_counts, by_type, flagged, acceptance, answer_summary,
run_latency), assembled into one document that Markdown, HTML and `pgeval gate` read.

Top-level keys: ``pgeval_report`` (format version), ``generated_at``, ``run``, ``experiment``,
``config_hash``, ``fingerprint``, ``k``, ``rel``, ``domain_discount``, ``order_rule``,
``timing_boundary``, ``counts``, ``summary`` (metric -> value: the retrieval measures,
``citation_precision``, ``answer_accuracy``, ``latency_p50_ms`` ...), ``acceptance``,
``thresholds``, ``latency``, ``answers``, ``by_type``, ``flagged``, ``warnings``, ``cases``
(per query: text, types, ranked chunk ids with their grades, latency, metric values, answer).
Optional: ``stage_report`` (an experiment's stages and loss attribution), ``sweep``.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.db import dict_rows
from ..core.errors import IncompleteRun, InputError, NotFound, param
from ..core.json_text import to_json
from ..measure import answers, latency, metrics, stage_method
from ..measure.measures import cutoffs

REPORT_VERSION = 1
DEFAULT_DEPTH = 10  # the chunks shown per case when no measure has a cut-off (rprec alone)
# a case's answer: the columns of pgeval.answer_per_query it shows
ANSWER_KEYS = (
    "answered",
    "n_cited",
    "n_supported",
    "refused",
    "n_facts",
    "facts_found",
    "latency_ms",
)


def resolve(conn: Any, name: str) -> tuple[metrics.RunInfo, dict | None]:
    """A run by name, else an experiment by name (its final stage of repetition 1)."""
    try:
        return metrics.resolve_run(conn, name), None
    except NotFound:
        pass
    found = dict_rows(
        conn,
        "SELECT experiment_id, name, status, config_hash FROM pgeval.experiment WHERE name = %s",
        (name,),
    )
    if not found:
        raise NotFound(f"no run or experiment named '{name}' (see `pgeval run list`)")
    exp = found[0]
    exp["stages"] = dict_rows(
        conn, "SELECT * FROM pgeval.experiment_stages(%s, 1)", (exp["experiment_id"],)
    )
    final = [s for s in exp["stages"] if s["is_final"]]
    if not final:
        raise NotFound(f"experiment '{name}' has no run yet")
    return metrics.resolve_run(conn, final[0]["name"]), exp


def _cases(
    conn: Any,
    run: metrics.RunInfo,
    depth: int,
    rel: int,
    per_query: list[dict],
    answer_rows: list[dict],
) -> list[dict]:
    rows = conn.execute(
        """SELECT q.query_id, q.query_text, q.types, q.answerable,
                  pgeval.n_relevant(q.grades_desc, %(rel)s),
                  (SELECT array_agg(r.chunk_id ORDER BY r.rank) FROM pgeval.result r
                    WHERE r.run_id = %(run)s AND r.query_id = q.query_id AND r.rank <= %(depth)s),
                  (SELECT array_agg(coalesce(j.grade, 0) ORDER BY r.rank) FROM pgeval.result r
                     LEFT JOIN pgeval.qrel j ON j.testset_id = q.testset_id
                          AND j.query_id = r.query_id AND j.chunk_id = r.chunk_id
                    WHERE r.run_id = %(run)s AND r.query_id = q.query_id AND r.rank <= %(depth)s),
                  coalesce(t.latency_ms, e.latency_ms), t.server_ms
             FROM pgeval.query q
             LEFT JOIN pgeval.query_timing t ON t.run_id = %(run)s AND t.query_id = q.query_id
             LEFT JOIN pgeval.query_latency(%(run)s) e ON e.query_id = q.query_id
            WHERE q.testset_id = %(ts)s
            ORDER BY q.position""",
        {"rel": rel, "run": run.run_id, "depth": depth, "ts": run.testset_id},
    ).fetchall()
    values = {r["query_id"]: {k: v for k, v in r.items() if k != "query_id"} for r in per_query}
    ans = {a["query_id"]: a for a in answer_rows}
    out = []
    for qid, text, types, answerable, n_rel, ranked, grades, lat, server_ms in rows:
        case = {
            "query_id": qid,
            "text": text,
            "types": list(types or []),
            "answerable": answerable,
            "valid": n_rel > 0,
            "n_relevant": n_rel,
            "ranked": list(ranked or []),
            "grades": list(grades or []),
            "latency_ms": lat,
            "server_ms": server_ms,
            "metrics": dict(values.get(qid, {})),
        }
        a = ans.get(qid)
        if a is not None:
            case["metrics"]["citation_precision"] = a["citation_precision"]
            if a["answer_correct"] is not None:
                case["metrics"]["answer_accuracy"] = a["answer_correct"]
            case["answer"] = {k: a[k] for k in ANSWER_KEYS}
        out.append(case)
    return out


def _plans(conn: Any, run_id: int, flagged: list[dict]) -> list[dict]:
    ids = sorted({f["query_id"] for f in flagged})
    plans = (
        dict(
            conn.execute(
                "SELECT query_id, plan FROM pgeval.query_plan WHERE run_id = %s "
                "AND query_id = ANY (%s)",
                (run_id, ids),
            ).fetchall()
        )
        if ids
        else {}
    )
    return [{**f, "plan": plans.get(f["query_id"])} for f in flagged]


def _answers(
    conn: Any, run_id: int, summary: dict, warnings: list[str]
) -> tuple[dict | None, list]:
    """(answer summary, per-query answer rows) of a run with imported answers, their two
    measures added to ``summary`` and what they leave out to ``warnings``; (None, [])
    without answers."""
    has_answers = answers.has_answers(conn, run_id)
    ans_summary = answers.summary(conn, run_id) if has_answers else None
    answer_rows = answers.per_query(conn, run_id) if ans_summary else []
    if ans_summary:
        summary["citation_precision"] = ans_summary["citation_precision"]
        summary["answer_accuracy"] = ans_summary["answer_accuracy"]
        if ans_summary["no_answer"]:
            warnings.append(
                f"{ans_summary['no_answer']} queries have no imported answer and score 0 end to end"
            )
        if ans_summary["unjudged"]:
            warnings.append(
                f"{ans_summary['unjudged']} answerable queries have no expected "
                "facts and are left out of answer accuracy"
            )
    return ans_summary, answer_rows


def _thresholds(conn: Any) -> dict:
    return {
        m: {"excellent": e, "good": g, "pass": p}
        for m, e, g, p in conn.execute(
            "SELECT measure, excellent, good, pass FROM pgeval.acceptance_thresholds()"
        ).fetchall()
    }


def build(
    conn: Any,
    name: str,
    measures: list[str] | None = None,
    *,
    rel: int = 1,
    domain_discount: float = 0.0,
    depth: int | None = None,
    allow_partial: bool = False,
    min_score: float | None = None,
) -> dict:
    """The report of run (or experiment) ``name`` as a plain dict (see the module docstring)."""
    from . import extras

    run, exp = resolve(conn, name)
    if exp is not None and exp["status"] != "complete" and not allow_partial:
        # its "final" stage would be the last one that ran, not the pipeline's last stage
        raise IncompleteRun(
            f"experiment '{exp['name']}' is {exp['status']}, not complete: its "
            "final stage may not have run (`pgeval run resume` it, or "
            f"{param('allow_partial', True)} to see it labelled)"
        )
    ev = metrics.evaluate(
        conn,
        run.name,
        measures,
        rel=rel,
        domain_discount=domain_discount,
        with_per_query=True,
        with_by_type=True,
        with_flagged=True,
        allow_partial=allow_partial,
        min_score=min_score,
    )
    assert ev.per_query is not None and ev.flagged is not None  # asked for above
    if exp is not None and exp["status"] != "complete":
        ev.warnings.insert(
            0,
            f"PARTIAL: experiment '{exp['name']}' is {exp['status']}; its "
            f"last stage that ran ({run.name}) stands in for its final stage",
        )
    k = cutoffs(ev.measures)
    depth = depth or max((max(v) for v in k.values()), default=DEFAULT_DEPTH)
    summary = dict(ev.summary)
    method_note = stage_method.note(run.stage, run.stage, run.params)
    if method_note:
        ev.warnings.append(method_note)
    timing = latency.percentiles(conn, run.run_id)
    if timing.get("end_to_end_of"):
        ev.warnings.append(
            f"latency of {run.name}: end to end, the sum per query of its inputs' latencies "
            f"({', '.join(timing['end_to_end_of'])}, searched one after the other; the fusion "
            "itself is not timed)"
        )
    answer_timing = latency.percentiles(conn, run.run_id, "answer")
    ans_summary, answer_rows = _answers(conn, run.run_id, summary, ev.warnings)
    summary.update(latency.summary_keys("retrieval", timing))
    summary.update(latency.summary_keys("answer", answer_timing))
    thresholds = _thresholds(conn)
    report = {
        "pgeval_report": REPORT_VERSION,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run": {
            "name": run.name,
            "testset": run.testset,
            "testset_hash": run.testset_hash,
            "stage": run.stage,
            "stage_label": stage_method.label(run.stage, run.stage, run.params),
            "status": run.status,
            "repetition": run.repetition,
            "experiment": run.experiment,
            "params": run.params,
        },
        "experiment": None if exp is None else {"name": exp["name"], "status": exp["status"]},
        "config_hash": run.config_hash or (exp or {}).get("config_hash"),
        "fingerprint": _fingerprint(conn, run.run_id),
        "measures": ev.measures,
        "k": k,
        "depth": depth,
        "rel": rel,
        "domain_discount": domain_discount,
        "order_rule": run.order_rule,
        "timing_boundary": run.timing_boundary,
        "counts": ev.counts,
        "summary": summary,
        "acceptance": ev.levels,
        "thresholds": thresholds,
        "latency": {"retrieval": timing, "answer": answer_timing},
        "answers": ans_summary,
        "by_type": ev.by_type,
        "flagged": _plans(conn, run.run_id, ev.flagged),
        "warnings": ev.warnings,
        "cases": _cases(conn, run, depth, rel, ev.per_query, answer_rows),
    }
    extras.attach(conn, report, run, exp, allow_partial)
    return report


def _fingerprint(conn: Any, run_id: int) -> dict[str, Any] | None:
    """The run's fingerprint, else its experiment's."""
    return conn.execute(
        "SELECT coalesce(r.fingerprint, e.fingerprint) FROM pgeval.run r LEFT JOIN "
        "pgeval.experiment e USING (experiment_id) WHERE r.run_id = %s",
        (run_id,),
    ).fetchone()[0]


def dumps(report: dict) -> str:
    return to_json(report) + "\n"


def write_text(text: str, path: str | Path) -> None:
    """Write atomically: a reader never sees half a report."""
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError("cannot write there: the directory does not exist", file=str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp makes the file 0600: give it the mode any new file gets here (the umask's)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: str | Path) -> dict:
    """A saved JSON report, checked enough that a gate or a comparison can trust its shape."""
    name = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError("no such file", file=name) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not a JSON report ({exc.msg})", file=name, line=exc.lineno) from None
    if not isinstance(data, dict) or "summary" not in data:
        raise InputError(
            "not a pgeval JSON report (no 'summary'; write one with "
            "`pgeval report RUN --format json --out FILE`)",
            file=name,
        )
    if not isinstance(data["summary"], dict):
        raise InputError("'summary' must be an object of metric values", file=name, field="summary")
    for key, value in data["summary"].items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(
                f"metric '{key}' is {value!r}, not a number", file=name, field=f"summary.{key}"
            )
    cases = data.get("cases", [])
    if not isinstance(cases, list) or any(
        not isinstance(c, dict) or "query_id" not in c for c in cases
    ):
        raise InputError(
            "'cases' must be a list of objects with a query_id", file=name, field="cases"
        )
    return data
