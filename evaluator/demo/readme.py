"""The README's demo figures, written from a demo run, and the check that they have not drifted.

    python -m evaluator.demo.readme          # runs `pgeval demo`, rewrites README.md's block
                                             # and docs/img/demo-sweep-hnsw.png

README.md holds the block between :data:`BEGIN` and :data:`END`: the demo's query counts, its
stage report (quality per stage, loss attribution), the report's one-sentence conclusion and the
setting the demo's sweep recommends. :func:`block` writes it from the demo's stage report (its
``--format json``) and its printed output; :func:`drift` compares the README's block with a
fresh one: the same text, every number within the run-to-run noise of an HNSW build
(tests/test_demo_cranfield.py runs the demo and fails on any drift)."""

from __future__ import annotations

import io
import math
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

BEGIN = (
    "<!-- demo figures: written by `python -m evaluator.demo.readme` from a demo run; "
    "tests/test_demo_cranfield.py fails when they drift -->"
)
END = "<!-- /demo figures -->"
ROOT = Path(__file__).resolve().parents[2]
IMAGE = "docs/img/demo-sweep-hnsw.png"
WIDTH = 100  # the README's prose lines

# two HNSW builds of the same rows differ a little (the graph's levels are drawn at random):
# a figure drifts when it moves by more than this (absolute for fractions, relative for counts)
FRACTION_NOISE = 0.015
COUNT_NOISE = 0.05


def _table(rows: list[dict], columns: list[str]) -> str:
    from ..cli import output

    buf = io.StringIO()
    output.table(rows, columns, file=buf)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def block(report: dict, demo_output: str) -> str:
    """The README's block from the demo's stage report (``stage-report --format json``) and its
    printed output (the sweep's recommendation)."""
    from ..cli.commands.stage_report_cmd import loss_rows
    from ..reporting.common import conclusion

    k = report["k"]
    counts = report["counts"]
    stages = [
        {
            "stage": s["stage"],
            f"recall@{k}": _mean(s, f"recall@{k}"),
            "mrr@20": _mean(s, "mrr@20"),
            f"ndcg@{k}": _mean(s, f"ndcg@{k}"),
            f"index_recall@{k}": (s.get(f"index_recall@{k}") or {}).get("mean"),
        }
        for s in report["stages"]
    ]
    loss = loss_rows(report["loss_attribution"], k)
    relevant = sum(r["chunks"] for r in report["loss_attribution"])
    found = re.search(r"^recommended: (\S+) — recall@(\d+) ", demo_output, re.M)
    target = re.search(r"smallest setting\s+reaching\s+recall\s+([\d.]+)", demo_output)
    sweep = (
        f"The demo's sweep of `hnsw.ef_search` recommends `{found.group(1)}`: the least work "
        f"reaching recall@{found.group(2)} {target.group(1) if target else ''} against exact "
        "search."
        if found
        else "The demo's sweep recommends no setting."
    )
    intro = (
        f"The Cranfield collection: {counts['queries']} queries, {counts['valid']} with graded "
        f"judgements (the {counts['unanswerable']} unanswerable ones have no relevant chunk "
        "and are left out of the means), all-MiniLM-L6-v2 vectors, HNSW at `ef_search=10`:"
    )
    answer = (
        f"{conclusion({'stage_report': report})} ([How to read it](docs/stage-report.md).) {sweep}"
    )
    return "\n".join(
        [
            BEGIN,
            textwrap.fill(intro, WIDTH, break_on_hyphens=False),
            "",
            "```text",
            f"$ pgeval stage-report {report['experiment']}",
            _table(stages, list(stages[0])),
            f"loss attribution (relevant chunks: {relevant})",
            _table(loss, list(loss[0])),
            "```",
            "",
            textwrap.fill(answer, WIDTH, break_long_words=False, break_on_hyphens=False),
            END,
        ]
    )


def _mean(stage: dict, measure: str) -> float | None:
    return ((stage.get("metrics") or {}).get(measure) or {}).get("mean")


def current(readme: str) -> str:
    """The README's block (BEGIN to END, both included)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError("README.md has no demo figures block")
    return readme[start : end + len(END)]


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def drift(old: str, new: str) -> list[str]:
    """Where ``old`` (the README's block) differs from ``new`` (a fresh demo's): its words (a
    demo's name, which carries its date, aside), or a number moved beyond the noise."""
    name = re.compile(r"demo-\d{8}-\d{6}(?:-\d+)?")
    old, new = name.sub("demo-…", old), name.sub("demo-…", new)
    out = []
    if _NUMBER.sub("#", old).split() != _NUMBER.sub("#", new).split():
        out.append("the words differ (regenerate: python -m evaluator.demo.readme)")
    for a, b in zip(_NUMBER.findall(old), _NUMBER.findall(new)):
        x, y = float(a), float(b)
        fraction = "." in a or "." in b
        noise = FRACTION_NOISE if fraction else max(COUNT_NOISE * max(abs(x), abs(y)), 0.5)
        if not math.isclose(x, y, abs_tol=noise):
            out.append(f"{a} in README.md, {b} in the demo")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the demo, then rewrite README.md's block and the sweep's picture from it."""
    readme = ROOT / "README.md"
    with tempfile.TemporaryDirectory(prefix="pgeval-readme-") as tmp:
        env_cmd = [sys.executable, "-m", "evaluator"]
        demo = subprocess.run(
            [*env_cmd, "demo", "--out", tmp], capture_output=True, text=True, check=True
        )
        experiment = re.search(r"^experiment: (demo-[\d-]+)$", demo.stdout, re.M)
        if experiment is None:
            raise SystemExit("the demo printed no experiment")
        report = subprocess.run(
            [*env_cmd, "stage-report", experiment.group(1), "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        )
        import json

        fresh = block(json.loads(report.stdout), demo.stdout)
        text = readme.read_text(encoding="utf-8")
        readme.write_text(text.replace(current(text), fresh), encoding="utf-8")
        shutil.copyfile(Path(tmp) / "sweep-hnsw.png", ROOT / IMAGE)
    print(f"wrote the demo figures into {readme} and {IMAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
