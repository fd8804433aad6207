"""docs/cli.md is the CLI reference generated from the `--help` texts: it must hold every command
and every option, exactly as `python -m evaluator.cli.reference` prints them today."""

import subprocess
import sys
from pathlib import Path

import click

from evaluator.cli import reference
from evaluator.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
REGENERATE = "python -m evaluator.cli.reference > docs/cli.md"


def option_names(command: click.Command) -> list[str]:
    """The long (or only) spelling of every option a command takes, --help excluded."""
    names = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            longs = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
            names.extend(longs or param.opts)
    return [n for n in names if n != "--help"]


def test_every_command_and_option_is_in_the_reference():
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for path, ctx in reference.walk(cli):
        name = " ".join(path)
        if f"\n{'#' * min(len(path) + 1, 4)} {name}\n" not in text:
            missing.append(name)
            continue
        section = text.split(f" {name}\n\n```text\n", 1)[1].split("\n```", 1)[0]
        missing += [f"{name} {opt}" for opt in option_names(ctx.command) if opt not in section]
    assert not missing, f"docs/cli.md lacks {missing}; regenerate it: {REGENERATE}"


def test_reference_is_not_stale():
    assert DOC.read_text(encoding="utf-8") == reference.render(), (
        f"docs/cli.md differs from the --help texts; regenerate it: {REGENERATE}"
    )


def test_reference_walks_every_subcommand():
    """The walk itself must not skip anything (else both checks above would pass vacuously)."""
    paths = {" ".join(p) for p, _ in reference.walk(cli)}
    for name in (
        "pgeval run pipeline",
        "pgeval run resume",
        "pgeval db status",
        "pgeval testset load",
        "pgeval stage-report",
        "pgeval sweep",
    ):
        assert name in paths
    groups = [ctx.command for _, ctx in reference.walk(cli) if isinstance(ctx.command, click.Group)]
    for group in groups:
        for sub in group.list_commands(click.Context(group)):
            assert any(p[-1] == sub for p, _ in reference.walk(cli))
    assert "--param" in option_names(
        next(ctx.command for p, ctx in reference.walk(cli) if p == ("pgeval", "sweep"))
    )


def test_generator_runs_as_a_module(tmp_path):
    """The documented command works from a shell, at any terminal width."""
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator.cli.reference"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"COLUMNS": "40", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == reference.render()


def test_every_help_fits_80_columns_and_named_commands_have_examples():
    """At an 80-column terminal no --help line is wider (prose written wider is rewrapped, a
    long example is continued with a shell backslash at an option); every command
    shows examples (issue "Output a DBA can trust", items 7 and 11)."""
    from evaluator.cli.help_format import fit_verbatim

    for path, ctx in reference.walk(cli):
        narrow = ctx.command.context_class(
            ctx.command, info_name=path[-1], terminal_width=80, max_content_width=100
        )
        text = ctx.command.get_help(narrow)
        assert max(len(line) for line in text.splitlines()) <= 80, (path, text)
        assert "Examples:" in text, path  # the README says every command has examples
    # an example continued where it is cut still runs when pasted: a backslash, then the rest
    line = "  pgeval sweep --sample-queries 300 --target kb --stage hnsw --param hnsw.ef_search=1,2"
    fitted = fit_verbatim("\b\nExamples:\n" + line, 60).splitlines()[2:]
    assert fitted[0].endswith(" \\") and fitted[1].startswith("      --stage")
    assert " ".join(f.rstrip(" \\").strip() for f in fitted) == line.strip()
    # a comment after a command goes on its own line above it, never continued into it
    commented = "    pgeval db start                       # embedded PostgreSQL 18 + pgvector"
    fitted = fit_verbatim("\b\nTypical flow:\n" + commented, 50).splitlines()[2:]
    assert fitted == ["    # embedded PostgreSQL 18 + pgvector", "    pgeval db start"]


def _helps(width: int):
    for path, ctx in reference.walk(cli):
        narrow = ctx.command.context_class(
            ctx.command, info_name=path[-1], terminal_width=width, max_content_width=100
        )
        yield path, ctx.command.get_help(narrow)


def test_help_wraps_at_words_never_mid_sentence():
    """At 80 columns no help line is broken before it had to be: a line that ends in the
    middle of a sentence is full (the next line's first word would not fit on it); a
    sentence continued on the next line is not taken back to a shallower indent (issue 40:
    "every relevant chunk of a valid / query that is not / in the final stage's top K")."""
    import re

    item = re.compile(r"^\s+\S+\s{2,}\S")  # "  term   its meaning"
    broken = []
    for path, text in _helps(80):
        lines = text.split("\nOptions:", 1)[0].splitlines()
        for a, b in zip(lines, lines[1:], strict=False):
            word = b.split()[0] if b.strip() else ""
            deep = len(a) - len(a.lstrip()), len(b) - len(b.lstrip())
            continued = (
                (deep[1] < deep[0] or deep == (2, 2))  # taken back, or a paragraph's lines
                and word[:1].islower()
                and a.rstrip()[-1:].isalnum()
                and not item.match(b)
                and not b.lstrip().startswith(("pgeval ", "#", "$"))
                and not a.lstrip().startswith(("pgeval ", "psql ", "#", "$"))  # an example
            )
            if continued and len(a) + 1 + len(word) <= 80:
                broken.append((" ".join(path), a, b))
    assert not broken, broken


def test_help_points_only_at_what_exists():
    """A help naming a docs/ file or a README section names one that exists (`testset load`
    pointed at a README section "Test sets" there is none of)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    headings = [h.lower() for h in re.findall(r"^#+ (.+)$", readme, re.M)]
    wrong = []
    for path, text in _helps(100):
        flat = " ".join(text.split())
        wrong += [
            (path, d) for d in re.findall(r"docs/[\w./-]+\.md", flat) if not (ROOT / d).is_file()
        ]
        for section in re.findall(r'README[,:]? (?:section )?"([^"]+)"', flat):
            if not any(section.lower() in h for h in headings):
                wrong.append((path, section))
    assert not wrong, wrong


def test_a_command_with_a_word_wider_than_the_line_is_continued_around_it():
    """A path longer than the terminal (the demo's `testset load /tmp/...`): the command is cut
    before and after it, the path whole on a line of its own; it used to loop forever."""
    from evaluator.cli.help_format import split_command

    path = "/tmp/" + "x" * 90 + "/demo-cases.jsonl"
    line = f"$ pgeval testset load {path} --name demo --grade-map 1=3,2=2"
    fitted = split_command(line, 80)
    assert fitted == [
        "$ pgeval testset load \\",
        f"    {path} \\",
        "    --name demo --grade-map 1=3,2=2",
    ]


def test_the_tuning_commands_show_their_options_under_group_headings():
    """sweep, advise, watch and run pipeline list their options under the headings of their
    groups (cli/option_groups.py), the query source first; only --help is left under
    "Options"."""
    from click.testing import CliRunner

    from evaluator.cli.option_groups import GroupedCommand

    for path in (["sweep"], ["advise"], ["watch"], ["run", "pipeline"]):
        ctx = click.Context(cli)
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, name)  # type: ignore[assignment]
        assert isinstance(command, GroupedCommand), path
        text = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100).output
        headings = [line for line in text.splitlines() if line.endswith(":") and line[0] != " "]
        assert headings[0] == "Queries:" and headings[-1] == "Options:", (path, headings)
        assert text.split("\nOptions:\n", 1)[1].split() == [
            "-h,",
            "--help",
            "Show",
            "this",
            "message",
            "and",
            "exit.",
        ]


def test_command_lists_say_each_summary_whole():
    """A group's list of commands (the top-level `pgeval --help`, `pgeval run --help`, ...)
    gives each command's first sentence whole, wrapped, never cut mid-phrase with "..." (issue
    50: "Recommend the index design (a stage kind of --designs),...")."""
    for path, text in _helps(80):
        commands = text.split("\nCommands:\n", 1)
        if len(commands) == 1:
            continue
        listed = commands[1].split("\n\n", 1)[0]
        assert not any(line.endswith("...") for line in listed.splitlines()), (path, listed)
        assert max(len(line) for line in listed.splitlines()) <= 80, (path, listed)
