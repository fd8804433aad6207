"""`pgeval gate`: release rules over a baseline and a candidate (each a run or a saved JSON report).

Rules are TOML, one table per metric, one key per rule::

    [gate]
    alpha = 0.05                    # for must_not_drop_significantly

    [metrics."recall@10"]
    must_not_drop = true            # candidate >= baseline
    [metrics."mrr@20"]
    max_drop = 0.01                 # baseline - candidate <= 0.01 (absolute)
    # max_drop_pct = 2              # (baseline - candidate) / baseline <= 2 % (relative)
    [metrics."ndcg@10"]
    must_not_drop_significantly = true   # not (lower and p < alpha), paired randomisation test
    [metrics.citation_precision]
    min = 0.97                      # candidate >= 0.97
    [metrics.latency_p95_ms]
    max_growth_pct = 20             # candidate <= baseline * 1.20
    # max = 800                     # candidate <= 800

Outcomes: pass, FAIL, or n/a (neither side has the metric, e.g. no answers imported; or the
baseline lacks it for a rule that compares). A candidate that lacks a metric the baseline has
fails every rule on it. Every rule is evaluated and every failure reported.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError
from ..measure import measures as registry
from ..measure import stats
from . import label
from .compare import check_same_testset, paired_values

if TYPE_CHECKING:
    from ..core.db import Database

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_RULES = """\
# pgeval default release gate (METRICS.md, "Release gate")
[gate]
alpha = 0.05                    # significance level of must_not_drop_significantly rules

[metrics."recall@10"]
must_not_drop = true

[metrics."mrr@20"]
max_drop = 0.01

[metrics.citation_precision]
min = 0.97

[metrics.answer_accuracy]
must_not_drop = true

[metrics.latency_p95_ms]
max_growth_pct = 20

[metrics.answer_latency_p95_ms]
max_growth_pct = 20
"""

# each kind of rule and how a result names it (its limit as {limit})
DESCRIPTIONS = {
    "min": ">= {limit:g}",
    "max": "<= {limit:g}",
    "max_drop": "drop <= {limit:g}",
    "max_drop_pct": "drop <= {limit:g} %",
    "must_not_drop": "must not drop",
    "must_not_drop_significantly": "must not drop significantly",
    "max_growth_pct": "growth <= {limit:g} %",
}
KINDS = tuple(DESCRIPTIONS)
FLAGS = ("must_not_drop", "must_not_drop_significantly")
GATE_KEYS = {"alpha": float, "permutations": int, "seed": int}
EPS = 1e-9


@dataclass
class Rule:
    metric: str
    kind: str
    limit: float | bool
    line: int | None = None

    def describe(self) -> str:
        return DESCRIPTIONS[self.kind].format(limit=self.limit)


@dataclass
class Rules:
    rules: list[Rule]
    alpha: float = 0.05
    permutations: int = stats.PERMUTATIONS
    seed: int = stats.SEED
    source: str = "defaults"

    def metrics(self) -> list[str]:
        return list(dict.fromkeys(r.metric for r in self.rules))


@dataclass
class Outcome:
    rule: Rule
    status: str  # pass | fail | n/a
    baseline: float | None
    candidate: float | None
    reason: str
    p_value: float | None = None

    def as_dict(self) -> dict:
        return {
            "metric": self.rule.metric,
            "rule": self.rule.describe(),
            "kind": self.rule.kind,
            "limit": self.rule.limit,
            "status": self.status,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "p_value": self.p_value,
            "reason": self.reason,
        }


@dataclass
class GateResult:
    baseline: str
    candidate: str
    rules_source: str
    outcomes: list[Outcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # partial sides (not in as_dict)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "fail"]

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "rules": self.rules_source,
            "passed": self.passed,
            "failed": len(self.failures),
            "not_applicable": sum(o.status == "n/a" for o in self.outcomes),
            "outcomes": [o.as_dict() for o in self.outcomes],
        }


def _locate(text: str, table: str, key: str | None) -> int | None:
    """Best-effort line number of ``key`` in ``[metrics.<table>]`` (or of the header)."""
    want = re.sub(r"[\s\"']", "", table)
    current, header_line = None, None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        m = re.match(r"^\[(.+)\]$", line)
        if m:
            current = re.sub(r"[\s\"']", "", m.group(1))
            if current == want:
                header_line = no
                if key is None:
                    return no
            continue
        if current == want and key and re.match(rf"^{re.escape(key)}\s*=", line):
            return no
    return header_line


def _error_at(text: str, source: str, table: str, key: str | None) -> Callable[[str], InputError]:
    """An InputError about ``key`` of ``[table]`` (the table itself when None): the rules file,
    the key's line, the field ``table.key``."""
    field = table if key is None else f"{table}.{key}"
    return partial(InputError, file=source, line=_locate(text, table, key), field=field)


def _gate_settings(text: str, source: str, gate: dict, out: Rules) -> None:
    """The ``[gate]`` table's settings set on ``out``, each checked."""
    for key, value in gate.items():
        bad = _error_at(text, source, "gate", key)
        if key not in GATE_KEYS:
            raise bad(f"unknown setting (known: {', '.join(GATE_KEYS)})")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (GATE_KEYS[key] is int and not isinstance(value, int))
        ):
            raise bad(f"must be a number, got {value!r}")
        setattr(out, key, GATE_KEYS[key](value))
    if not 0 < out.alpha < 1:
        raise _error_at(text, source, "gate", "alpha")(
            f"alpha must be between 0 and 1, got {out.alpha}"
        )
    if out.permutations < 100:
        raise _error_at(text, source, "gate", "permutations")("use at least 100 permutations")


def _metric_rules(text: str, source: str, metric: str, spec: Any) -> list[Rule]:
    """The rules of one ``[metrics.NAME]`` table (a flag set to false is no rule)."""
    where = f"metrics.{metric}"
    if not registry.is_known(metric):
        raise _error_at(text, source, where, None)(
            f"unknown metric '{metric}' ({registry.spelled()})"
        )
    if not isinstance(spec, dict):
        raise InputError("must be a table of rules", file=source, field=where)
    rules = []
    for kind, limit in spec.items():
        line = _locate(text, where, kind)
        bad = partial(InputError, file=source, line=line, field=f"{where}.{kind}")
        if kind not in KINDS:
            raise bad(f"unknown rule (known: {', '.join(KINDS)})")
        if kind in FLAGS:
            if not isinstance(limit, bool):
                raise bad(f"must be true or false, got {limit!r}")
            if not limit:
                continue
        elif isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
            raise bad(f"must be a number >= 0, got {limit!r}")
        rules.append(Rule(metric, kind, limit if kind in FLAGS else float(limit), line))
    return rules


def parse_rules(text: str, source: str = "<rules>") -> Rules:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise InputError(
            f"not valid TOML ({exc})", file=source, line=int(m.group(1)) if m else None
        ) from None
    unknown = [k for k in data if k not in ("gate", "metrics")]
    if unknown:
        raise InputError(
            f"unknown table '{unknown[0]}' (use [gate] and [metrics.NAME])",
            file=source,
            line=_locate(text, unknown[0], None),
            field=unknown[0],
        )
    out = Rules(rules=[], source=source)
    _gate_settings(text, source, data.get("gate") or {}, out)
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise InputError("'metrics' must be a table of tables", file=source, field="metrics")
    for metric, spec in metrics.items():
        out.rules.extend(_metric_rules(text, source, metric, spec))
    if not out.rules:
        raise InputError(
            'no rules (add e.g. [metrics."recall@10"] must_not_drop = true)', file=source
        )
    return out


def load_rules(path: str | Path | None) -> Rules:
    if path is None:
        return parse_rules(DEFAULT_RULES, "defaults")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    return parse_rules(text, str(path))


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}" if abs(v) >= 100 else f"{v:.4f}"


def check(rule: Rule, base: dict, cand: dict, rules: Rules) -> Outcome:
    m = rule.metric
    b, c = (base.get("summary") or {}).get(m), (cand.get("summary") or {}).get(m)

    def verdict(ok: bool, reason: str) -> Outcome:
        return Outcome(rule, "pass" if ok else "fail", b, c, reason)

    if b is None and c is None:
        return Outcome(rule, "n/a", b, c, f"neither side has {m}")
    if c is None:
        return verdict(
            False,
            f"{m}: the candidate has no value (baseline "
            f"{_fmt(b)}): it cannot show that it did not regress",
        )
    if rule.kind == "min":
        ok = c >= rule.limit - EPS
        return verdict(
            ok,
            f"{m} {_fmt(c)} is {'at or above' if ok else 'below'} the minimum {_fmt(rule.limit)}",
        )
    if rule.kind == "max":
        ok = c <= rule.limit + EPS
        return verdict(
            ok, f"{m} {_fmt(c)} is {'within' if ok else 'above'} the maximum {_fmt(rule.limit)}"
        )
    if b is None:
        return Outcome(rule, "n/a", b, c, f"the baseline has no {m} to compare with")
    change = f"({_fmt(b)} → {_fmt(c)})"
    if rule.kind == "must_not_drop":
        ok = c >= b - EPS
        return verdict(ok, f"{m} {'did not drop' if ok else f'dropped by {b - c:.4f}'} {change}")
    if rule.kind == "max_drop":
        ok = b - c <= rule.limit + EPS
        what = f"dropped by {b - c:.4f}" if c < b else "did not drop"
        return verdict(
            ok,
            f"{m} {what} {change}, {'within' if ok else 'more than'} the allowed {rule.limit:g}",
        )
    if rule.kind == "max_drop_pct":
        pct = (b - c) / b * 100 if b else (0.0 if c >= b else float("inf"))
        ok = pct <= rule.limit + EPS
        return verdict(
            ok,
            f"{m} changed by {-pct:+.1f} % {change}, "
            f"{'within' if ok else 'more than'} the allowed drop of {rule.limit:g} %",
        )
    if rule.kind == "max_growth_pct":
        pct = (c - b) / b * 100 if b else (0.0 if c <= b else float("inf"))
        ok = pct <= rule.limit + EPS
        return verdict(
            ok,
            f"{m} grew by {pct:+.1f} % {change}, "
            f"{'within' if ok else 'more than'} the allowed {rule.limit:g} %",
        )
    return _significance(rule, base, cand, rules, b, c, change)


def _significance(
    rule: Rule, base: dict, cand: dict, rules: Rules, b: float, c: float, change: str
) -> Outcome:
    """``must_not_drop_significantly``: a paired randomisation test over the per-query values."""
    m = rule.metric
    ids, a, bb = paired_values(base, cand, m)
    if not ids:
        side = (
            "baseline"
            if not any((x.get("metrics") or {}).get(m) is not None for x in base.get("cases") or [])
            else "candidate"
        )
        raise InputError(
            f"rule '{m} must not drop significantly' needs per-query values, and "
            f"the {side} ('{label(base if side == 'baseline' else cand)}') has "
            "none (save reports with `pgeval report RUN --format json`)",
            file=rules.source,
            line=rule.line,
            field=f"metrics.{m}.{rule.kind}",
        )
    res = stats.paired(a, bb, rules.permutations, rules.permutations, rules.seed)
    bad = res.delta < 0 and res.p_value < rules.alpha
    return Outcome(
        rule,
        "fail" if bad else "pass",
        b,
        c,
        f"{m} {'dropped' if res.delta < 0 else 'did not drop'} {change}, paired "
        f"randomisation p = {res.p_value:.4f} over {res.n} queries "
        f"({'significant' if res.p_value < rules.alpha else 'not significant'} at "
        f"{rules.alpha:g})",
        p_value=res.p_value,
    )


def evaluate(base: dict, cand: dict, rules: Rules) -> GateResult:
    """Every rule against the two report documents (never stops at the first failure)."""
    check_same_testset(base, cand)
    outcomes = [check(rule, base, cand, rules) for rule in rules.rules]
    return GateResult(label(base), label(cand), rules.source, outcomes)


def gate(
    database: Database,
    baseline: str,
    candidate: str,
    rules: str | Path | None = None,
    *,
    rel: int = 1,
    allow_partial: bool = False,
) -> GateResult:
    """Check ``candidate`` against ``baseline`` (run names or saved JSON reports) under the rules
    file ``rules`` (None: the built-in rules). Returns the result; raising on failure is the
    caller's choice (`pgeval gate` exits 2)."""
    from ..measure.metrics import measures_for
    from . import obtain_all

    rule_set = load_rules(rules)
    measures = measures_for()
    measures += [
        m for m in rule_set.metrics() if registry.parse(m).kind == "ranked" and m not in measures
    ]
    sides = obtain_all(
        database, [baseline, candidate], measures=measures, rel=rel, allow_partial=allow_partial
    )
    result = evaluate(sides[0], sides[1], rule_set)
    result.warnings = [
        f"{side['run']['name']}: {w}"
        for side in sides
        for w in side.get("warnings") or []
        if "PARTIAL" in w
    ]
    return result
