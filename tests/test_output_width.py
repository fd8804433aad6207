"""Output for people: every table command fits 80 columns by default (headers never cut, numbers
at 4 significant digits, 12-character hashes), --wide shows everything; long work prints one
progress line at most every interval when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import re

import prerequisites
import pytest
from rich.filesize import decimal

from evaluator.cli import output
from evaluator.cli.commands import advise_cmd
from evaluator.core.progress import LineProgress

LONG = "hnsw-with-a-rather-long-stage-name-for-the-candidate"
ADVISE_WIDE_ONLY = advise_cmd.TABLE_WIDE_ONLY


def test_numbers_and_hashes_are_short():
    assert [output.fmt_number(v) for v in (0.43970723, 20.0, 7589.8456, 123456.7, 0.0)] == [
        "0.4397",
        "20",
        "7590",
        "123457",
        "0",
    ]
    h = "a" * 64
    assert output.fmt_value(h, wide=False) == "a" * 12 and output.fmt_value(h) == h


def test_line_progress_at_most_every_interval():
    now = [0.0]
    stream = io.StringIO()
    p = LineProgress(stream=stream, every=10, clock=lambda: now[0])
    p.start()
    task = p.add_task("sweep", total=400)
    for t, n in ((3, 50), (9, 50), (10.5, 100), (12, 50), (21, 50), (32, 100)):
        now[0] = t
        p.update(task, advance=n)
    p.stop()
    lines = stream.getvalue().splitlines()
    # the ETA at the rate since the previous line: 100 in the last 10.5 s, 100 left; all done
    # (what follows the last piece may still take a while): no "ETA 0 s"
    assert lines == [
        "progress: sweep 200/400 (50%), 10 s elapsed, ETA 10 s",
        "progress: sweep 300/400 (75%), 21 s elapsed, ETA 10 s",
        "progress: sweep 400/400 (100%), 32 s elapsed, finishing",
    ]


def test_line_progress_eta_follows_work_that_slows_down():
    """Each point of a sweep slower than the last (ef_search rising): the whole run's average
    would promise an ETA that then rises line after line; the recent rate's does not."""
    now = [0.0]
    stream = io.StringIO()
    p = LineProgress(stream=stream, every=10, clock=lambda: now[0])
    p.start()
    task = p.add_task("sweep", total=2000)
    for t in range(1, 121):  # 20 units a second, then 2 (the points that cost more)
        now[0] = float(t)
        p.update(task, advance=20 if t <= 30 else 2)
    etas = [int(m) for m in re.findall(r"ETA (\d+) s", stream.getvalue())]
    assert len(etas) >= 10 and not stream.getvalue().startswith("progress: sweep 0/")
    # from the line after the slow-down on, the ETA falls as time passes (the whole run's
    # average gave 89 s, then 122 s, 149 s, ... for the same work)
    assert all(b < a for a, b in zip(etas[3:], etas[4:], strict=False)), etas


def test_line_progress_in_bytes():
    from evaluator.core.progress import _Task, line

    task = _Task("import run.trec", 4_500_000, 1_200_000)
    assert line(task, 3, "bytes") == (
        "progress: import run.trec 1.2 MB/4.5 MB (27%), 3 s elapsed, ETA 8 s"
    )


def test_piped_progress_lines_fit_the_columns_with_names_whole(monkeypatch, capsys):
    """Piped with $COLUMNS: a progress line wraps at its words like the other plain text (a long
    group and point label whole); without it, whole lines (for grep)."""
    from evaluator.cli.commands.common import progress_bar

    monkeypatch.setenv("PGEVAL_PROGRESS_INTERVAL", "0")
    name = f"group 3/6 knowledge_base_id={LONG} hnsw.ef_search=40 (measured)"
    for columns in ("80", None):
        if columns:
            monkeypatch.setenv("COLUMNS", columns)
        else:
            monkeypatch.delenv("COLUMNS", raising=False)
        bar = progress_bar(transient=True)
        assert isinstance(bar, LineProgress)
        bar.start()
        task = bar.add_task(name, total=4500)
        bar.update(task, advance=1350)
        bar.stop()
        lines = capsys.readouterr().err.splitlines()
        said = " ".join(line.strip() for line in lines)
        assert said.startswith(f"progress: {name} 1350/4500 (30%), "), lines
        if columns:
            assert len(lines) > 1 and max(map(len, lines)) <= 80, lines
            assert all(line.startswith("  ") for line in lines[1:]), lines
            assert any(LONG in line for line in lines), lines  # never cut
        else:
            assert len(lines) == 1


def test_plain_lines_wrap_with_a_hanging_indent(monkeypatch):
    text = "  index: " + " ".join(["word"] * 30)
    assert output.wrapped(text, None) == text
    lines = output.wrapped(text, 40, indent=4).splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    assert lines[0].startswith("  index: ") and all(
        line.startswith(" " * 6 + "word") for line in lines[1:]
    )
    assert " ".join(line.strip() for line in lines) == text.strip()
    monkeypatch.delenv("COLUMNS", raising=False)
    assert output.text_width(io.StringIO()) is None  # piped, no COLUMNS: never wrapped
    monkeypatch.setenv("COLUMNS", "72")
    assert output.text_width(io.StringIO()) == 72


def _widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


DEMO: dict = {}  # the demo's output, as the fixture ran it (piped, no $COLUMNS)


def capture_tables(mp: pytest.MonkeyPatch) -> list[tuple[list[dict], str]]:
    """Every table printed from now on (within ``mp``): its rows and its text at 80 columns."""
    rendered: list[tuple[list[dict], str]] = []
    original = output.table

    def capture(rows, columns=None, title=None, file=None, **kw):
        rows = list(rows)
        buf = io.StringIO()
        with pytest.MonkeyPatch.context() as width:
            width.setenv("COLUMNS", "80")
            original(rows, columns, None, file=buf, **kw)
        rendered.append(([{c: r.get(c) for c in columns or r} for r in rows], buf.getvalue()))
        original(rows, columns, title, file=file, **kw)

    mp.setattr(output, "table", capture)
    return rendered


def assert_whole(rows: list[dict], text: str) -> None:
    """Every name, setting and verdict of ``rows`` is in ``text`` word by word (wrapped only
    after a comma or a space), never cut; every line fits 80 columns."""
    assert max(_widths(text)) <= 80, text
    whole = output.KEY_COLUMNS | output.DECISION_COLUMNS
    lines = [
        ln.split(" | ", 1)[-1] if ln.startswith(tuple(whole)) else ln for ln in text.splitlines()
    ]
    flat = " ".join(ln.strip() for ln in lines)
    for row in rows:
        for column, value in row.items():
            if column in whole and value not in (None, ""):
                text_value = output.fmt_value(value, wide=False)
                for word in output.tokens(text_value, column in output.COMPOUND_COLUMNS):
                    assert word.strip() in flat, (column, word, text)


def test_a_wide_advise_table_keeps_design_setting_and_verdict_whole(monkeypatch):
    """The issue's 80-column advise: a long design name, a setting of two GUCs, grouped: the
    names, the setting and the verdict are whole (a table, or one record per design)."""
    from evaluator.tuning.advise import report

    design = {
        "design": "hnsw-halfvec",
        "build": {"m": 16, "ef_construction": 64},
        "setting": {"hnsw.ef_search": 640, "hnsw.iterative_scan": "strict_order"},
        "recall": 0.9512,
        "recall_margin": 0.012,
        "p50_ms": 1.2,
        "p95_ms": 3.4567,
        "p99_ms": 4.1,
        "qps": 812.4,
        "rows": 10,
        "index_bytes": 123_456_789,
        "build_ms": 45_678.0,
        "maintenance_work_mem": "256MB",
        "fits_shared_buffers": True,
        "worst_group": {"group": "knowledge-base-0042", "rows": 1200, "recall": 0.9512},
        "reached": True,
        "over_budget": ["p95_ms", "index_mb"],
        "sweep": "s",
    }
    plain = {**design, "design": "ivfflat", "build": {"lists": 100}, "over_budget": []}
    plain["setting"] = {"ivfflat.probes": 12}
    monkeypatch.setenv("COLUMNS", "80")
    for group_by in (None, "knowledge_base_id"):
        result = {"k": 10, "designs": [design, plain], "group_by": group_by, "screened_on": None}
        rows = report.rows(result, short=True)
        assert rows[0]["verdict"] == "over p95_ms, index_mb" and rows[1]["verdict"] == "meets"
        buf = io.StringIO()
        output.table(rows, wide_only=ADVISE_WIDE_ONLY, file=buf)
        text = buf.getvalue()
        assert_whole(
            [{k: v for k, v in r.items() if k not in ADVISE_WIDE_ONLY} for r in rows], text
        )
        assert "verdict" in text and "…" not in text, text
        assert "left out" not in text, text  # no decision column left out


def test_the_demo_and_its_advise_fit_80_columns_with_names_whole(long_named):
    """What `pgeval demo` prints, piped (its advise included): every line within 80 columns
    but a word longer than that (none in the demo), every table's names, settings and
    verdicts whole, long lines wrapped at words."""
    tables = DEMO["tables"]
    assert any("verdict" in rows[0] for rows, _ in tables if rows), "advise printed a table"
    for rows, text in tables:
        assert_whole(rows, text)
    for stream in (DEMO["out"], DEMO["err"]):
        wide = [ln for ln in stream.splitlines() if len(ln) > 80]
        assert not wide, wide
    out = DEMO["out"]
    assert "recommended: " in out and "advise on target" in out, out
    # a command too wide is continued at an option with a backslash: it still runs when pasted
    assert re.search(r"^\$ pgeval advise .* \\\n    --", out, re.M), out


@pytest.fixture(scope="module")
def long_named(database):
    """An experiment on the generated demo table whose stages have long names, and a sweep."""
    from click.testing import CliRunner

    from evaluator.cli import main

    def run(*args):
        runner = CliRunner()
        with runner.isolation() as streams:
            code = main(list(args))
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()

    with pytest.MonkeyPatch.context() as mp:
        tables = capture_tables(mp)
        code, out, err = run(
            "demo", "--corpus", "generated", "--queries", "20", "--no-diskann", "--keep"
        )
    assert code == 0, err
    DEMO.update(out=out, err=err, tables=tables)
    target = re.search(r"target add (demo[-0-9]*) ", out).group(1)
    testset = re.search(r"--testset (demo[-0-9]*) ", out).group(1)
    code, out, err = run(
        "run",
        "pipeline",
        "--testset",
        testset,
        "--target",
        target,
        "--stages",
        f"exact,{LONG}=hnsw,bm25-keyword-path-long-name=bm25,"
        "merge-of-all-the-long-named-paths=merge",
        "--name",
        "width-experiment-with-a-long-name",
    )
    assert code == 0, err
    yield run, testset, target
    with database.connect(autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS pgeval_demo CASCADE")
        conn.execute("DELETE FROM pgeval.target WHERE name = %s", (target,))


def test_every_table_command_fits_80_columns(long_named, monkeypatch):
    """Each table (captured as it is rendered) fits 80 columns, none cuts a header."""
    run, testset, target = long_named
    rendered = []
    original = output.table

    def capture(rows, columns=None, title=None, file=None, **kw):
        buf = io.StringIO()
        original(rows, columns, None, file=buf, **kw)
        rendered.append((list(columns or []), buf.getvalue()))
        original(rows, columns, title, file=file, **kw)

    monkeypatch.setattr(output, "table", capture)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("PGEVAL_PROGRESS_INTERVAL", "0")
    exp = "width-experiment-with-a-long-name"
    final = f"{exp}.merge-of-all-the-long-named-paths.1"
    commands = [
        ("stage-report", exp),
        ("metrics", final),
        ("run", "list"),
        ("testset", "list"),
        ("target", "list"),
        ("compare", f"{exp}.exact.1", final),
        (
            "sweep",
            "--testset",
            testset,
            "--target",
            target,
            "--stage",
            "hnsw",
            "--param",
            "hnsw.ef_search=10,40",
            "--repeat",
            "1",
        ),
    ]
    for args in commands:
        rendered.clear()
        code, out, err = run(*args)
        assert code == 0, (args, err)
        assert rendered, args
        for columns, text in rendered:
            assert max(_widths(text)) <= 80, (args, text)
            if text.startswith("-[ RECORD 1 ]"):  # too wide for a table: one record per row
                labels = {ln.split(" | ")[0].strip() for ln in text.splitlines() if " | " in ln}
                assert labels and (not columns or labels - {""} <= set(columns)), (args, text)
                continue
            header = text.splitlines()[0]
            assert "…" not in header, (args, text)
            shown = header.split()
            assert shown and all(any(tok in c.split() for c in columns) for tok in shown), (
                args,
                text,
            )
        if args[0] in ("stage-report", "metrics"):  # plain lines too, not only tables
            assert max(_widths(out)) <= 80, (args, out)
        if args[0] == "sweep":  # piped: one-line progress messages with a total
            assert re.search(r"^progress: sweep .* \d+/\d+ \(\d+%\)", err, re.M), err
    # names are never cut: other text columns give way, and a name longer than the console
    # allows wraps within its cell (all its characters shown, in order); none ends in "…"
    for args, key in ((("run", "list"), "run"), (("target", "list"), "target")):
        code, out, _ = run(*args)
        names = [r[key] for r in json.loads(run(*args, "--format", "json")[1])]
        assert code == 0 and names and "…" not in out, (args, out)
        assert all(n in out for n in names if len(n) <= 30), (args, out)
        assert max(_widths(out)) <= 80
    code, out, _ = run("run", "list")
    # what was left out to keep the names whole, or each run as a record with every column
    assert "--wide shows every column" in out or (
        "-[ RECORD 1 ]" in out and "config_hash" in out and "--wide shows a table" in out
    )
    code, out, _ = run("run", "list", "--wide")
    assert code == 0 and max(_widths(out)) > 80 and "started_at" in out
    code, out, _ = run("run", "list", "--format", "json")
    hashes = [r["config_hash"] for r in json.loads(out) if r["config_hash"]]
    assert hashes and all(len(h) == 64 for h in hashes)


def test_run_import_progress_line_with_the_file_size(long_named, monkeypatch, tmp_path):
    """Piped: `run import` prints one-line progress messages, bytes of the file as the total."""
    run, testset, _ = long_named
    monkeypatch.setenv("PGEVAL_PROGRESS_INTERVAL", "0")
    path = tmp_path / "exported.trec"
    exp = "width-experiment-with-a-long-name"
    code, _, err = run("run", "export", f"{exp}.exact.1", "--out", str(path))
    assert code == 0, err
    size = path.stat().st_size
    code, out, err = run("run", "import", str(path), "--testset", testset, "--name", "imported")
    assert code == 0 and "imported run 'imported'" in out, err
    total = re.escape(decimal(size))
    assert re.search(
        rf"^progress: import exported\.trec (\(ranking, storing\) )?[\d.]+ \w+/{total} \(\d+%\)",
        err,
        re.M,
    ), err
    assert "progress" not in out  # stderr only


def test_progress_tells_the_truth(long_named):
    """A rerun of the demo's advise builds nothing and says so per design ("stored"); an
    input error is the only line, no progress line before it (issue 40, item 4)."""
    run, testset, target = long_named
    args = ("advise", "--testset", testset, "--target", target, "--designs", "hnsw,ivfflat")
    code, _, err = run(*args, "--target-recall", "0.95")
    assert code == 0, err
    done = [ln for ln in err.splitlines() if re.match(r"advise: design \d of 2: .*: ", ln)]
    assert len(done) == 2 and all("stored: nothing built or measured" in ln for ln in done), err
    assert "building" not in err, err
    code, out, err = run("advise", "--testset", "no-such-set", "--target", target)
    assert code == 1 and err.splitlines() == [
        "pgeval: error: no test set named 'no-such-set' (see `pgeval testset list`)"
    ], err
    code, out, err = run(*args, "--build", "hnsw:m=abc")
    assert code == 1 and len(err.splitlines()) == 1 and "expected an integer" in err, err


@prerequisites.mark("chromium", prerequisites.chromium_missing())
def test_advise_page_fits_1280_px_with_its_verdicts_and_hover(long_named, tmp_path):
    """advise.html at 1280 px in headless Chromium (issue 40, item 5): the designs table fits the
    window with its verdict column in view; the plot is an inline SVG whose points tell their
    setting, recall, p95 and index size on hover; nothing is fetched (no URL in the page)."""
    from test_report import chromium, console_messages

    run, testset, target = long_named
    page = tmp_path / "advise.html"
    code, _, err = run(
        "advise", "--testset", testset, "--target", target, "--designs", "hnsw,ivfflat",
        "--target-recall", "0.95", "--max-p95-ms", "5", "--report", str(page),
    )  # fmt: skip
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    hovers = re.findall(r"<title>([^<]*)</title>", text)[1:]
    assert hovers and all("recall@10" in h and "p95" in h and " MB" in h for h in hovers), hovers
    assert any("=" in h.split(":")[0] for h in hovers)  # the setting of the point
    measure = (
        "<script>var t=document.querySelector('h2 + div.wide table');var h=[].slice.call("
        "t.querySelectorAll('th')).filter(function(x){return x.textContent=='verdict'})[0];"
        "document.body.setAttribute('data-fit',[Math.round(t.getBoundingClientRect().right),"
        "Math.round(h.getBoundingClientRect().right),window.innerWidth].join(','))</script>"
    )
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", measure + "</body>"), encoding="utf-8")
    proc = chromium(tmp_path, probe, "--window-size=1280,900", "--dump-dom")
    assert proc.returncode == 0 and console_messages(proc.stderr) == [], proc.stderr[-2000:]
    table_right, verdict_right, window = map(
        int, re.search(r'data-fit="([\d,]+)"', proc.stdout).group(1).split(",")
    )
    assert verdict_right <= table_right <= window <= 1280, (table_right, verdict_right, window)
    assert "p95 budget 5 ms" in text  # the budget line, named in the legend


def test_a_command_cut_over_several_lines_ends():
    """A command cut at a continuation's indent never loops: each cut line gains words, every
    line fits or is one word wider than the width, and the words are the command's."""
    from evaluator.cli.help_format import split_command

    line = "pgeval sweep --sample-queries 300 --target kb --stage hnsw " + "x" * 90
    lines = split_command(line, 40)
    assert [w for piece in lines for w in piece.split() if w != "\\"] == line.split()
    assert all(len(p) <= 40 or len(p.split()) == 1 for p in lines[:-1])
    assert lines[-1].strip() == "x" * 90


def test_watch_fits_80_columns(long_named, monkeypatch):
    """A probe's lines (issue 50: watch's lines reached 368 characters) fit 80 columns, the
    target's name whole."""
    run, _, target = long_named
    monkeypatch.setenv("COLUMNS", "80")
    args = ["watch", "--target", target, "--stage", "hnsw", "--sample-queries", "20"]
    code, out, err = run(*args, "--set", "hnsw.ef_search=40", "--no-remedy")
    assert code in (0, 2), err
    wide = [ln for ln in (out + err).splitlines() if len(ln) > 80]
    assert not wide, wide
    assert target in out


def test_a_grouped_sweep_fits_80_columns(long_named, conn, monkeypatch):
    """`sweep --group-by --find` as a DBA reads it (issue 50: its lines reached 372 characters):
    every line of its tables and sentences within 80 columns, the group values whole."""
    run, _, _ = long_named
    conn.execute(
        "CREATE TABLE IF NOT EXISTS width_tenants AS SELECT i AS id, i % 4 AS knowledge_base_id, "
        "(SELECT array_agg(sin(i * j)::real) FROM generate_series(1, 8) j)::vector(8) AS emb "
        "FROM generate_series(1, 800) i"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS width_tenants_hnsw ON width_tenants USING hnsw (emb vector_l2_ops)"
    )
    code, _, err = run(
        "target", "add", "width-tenants", "--table", "width_tenants", "--id-column", "id",
        "--vector-column", "emb",
    )  # fmt: skip
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(
        "sweep", "--target", "width-tenants", "--stage", "hnsw", "--sample-queries", "10",
        "--group-by", "knowledge_base_id", "--find", "hnsw.ef_search",
    )  # fmt: skip
    assert code == 0, err
    wide = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not wide, wide
    assert "recommended: " in out and "scan modes: " in out, out
    assert all(f"\n{g} " in out for g in range(4)), out  # each group's row, its value whole
