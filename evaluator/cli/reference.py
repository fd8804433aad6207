"""The CLI reference, docs/cli.md, generated from the commands' own ``--help`` texts.

    python -m evaluator.cli.reference > docs/cli.md

``tests/test_cli_reference.py`` fails when docs/cli.md differs from what this prints, so the
reference cannot fall behind a command or an option. The help is rendered at a fixed width (100
columns, the group's ``max_content_width``) whatever the terminal, so the output is the same on
every machine.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

WIDTH = 100

HEADER = """\
# pgeval command reference

Generated from the `--help` text of every command by `python -m evaluator.cli.reference >
docs/cli.md`; do not edit by hand (`tests/test_cli_reference.py` fails when this file is stale).
Every command's help is also one `pgeval COMMAND --help` away. Exit codes: 0 success, 1 error (one
line on stderr, nothing half-written), 2 a release gate failed; `pgeval db status` follows
pg_ctl's convention where it differs.
"""


def walk(
    command: click.Command,
    path: tuple[str, ...] = ("pgeval",),
    parent: click.Context | None = None,
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    """Yield (command path, click context) for the command and, depth first, its subcommands."""
    settings = {
        k: v
        for k, v in (command.context_settings or {}).items()
        if k not in ("terminal_width", "max_content_width")
    }
    ctx = command.context_class(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **settings,
    )
    yield path, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from walk(sub, path + (name,), ctx)


def render() -> str:
    from .main import cli

    parts = [HEADER]
    entries = list(walk(cli))
    parts.append("## Contents\n")
    for path, _ in entries[1:]:
        anchor = "-".join(path).replace(" ", "-")
        parts.append(f"- [`{' '.join(path)}`](#{anchor})")
    parts.append("")
    for path, ctx in entries:
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"{level} {' '.join(path)}\n")
        parts.append("```text")
        parts.append(ctx.command.get_help(ctx).rstrip())
        parts.append("```\n")
    return "\n".join(parts).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
