"""``--help`` that fits the terminal: click keeps a paragraph marked ``\\b`` exactly as written,
so help texts written at 100 columns came out up to 100 wide in an 80-column terminal. Here a
``\\b`` paragraph of plain prose is wrapped like any other (its line breaks were only the
author's), and a line of an example that is still too wide is continued on the next line at
its last ``--option`` (or space) that fits, with a shell continuation, so it still runs when
pasted."""

from __future__ import annotations

import click

CONTINUED = "    "  # a continued example line: four more spaces than the line it continues


def _is_prose(lines: list[str]) -> bool:
    """Lines of running text: none indented, none a list item or a command, no heading."""
    return bool(lines) and not any(
        line[:1].isspace()
        or line.lstrip().startswith(("- ", "* ", "pgeval", "$", "#", "|"))
        or line.rstrip().endswith(":")
        for line in lines
    )


def split_command(line: str, width: int) -> list[str]:
    """``line`` cut into lines of at most ``width`` (where a cut is possible), each but the last
    ending in `` \\``, the others indented four spaces more than ``line``."""
    out: list[str] = []
    indent = line[: len(line) - len(line.lstrip())]
    while len(line) > width:
        room = width - 2  # the " \" the cut line ends with
        cut = line.rfind(" --", len(indent) + 1, room)
        if cut <= len(indent):
            cut = line.rfind(" ", len(indent) + 1, room)
        if cut <= len(indent):
            break  # one word wider than the line: left as it is
        out.append(line[:cut].rstrip() + " \\")
        line = indent + CONTINUED + line[cut:].lstrip()
    out.append(line)
    return out


def _wrap(line: str, width: int) -> list[str]:
    """A line of a list or a table too wide: wrapped, continued two spaces further in."""
    import textwrap

    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(
        line,
        width,
        initial_indent="",
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


def fit_verbatim(text: str, width: int) -> str:
    """``text`` (a command's help) with its ``\\b`` paragraphs fitted to ``width``."""
    out = []
    for para in text.split("\n\n"):
        if not para.startswith("\b\n"):
            out.append(para)
            continue
        lines = para[2:].splitlines()
        if _is_prose(lines):
            out.append(" ".join(line.strip() for line in lines))
            continue
        fitted: list[str] = []
        command = False  # within a command (its first line starts with pgeval)
        for line in lines:
            command = line.lstrip().startswith("pgeval") or (
                command and bool(fitted) and fitted[-1].endswith("\\")
            )
            if command and len(line) > width and " # " in line:
                # a comment after a command: on its own line above it, never continued into
                # the command (a backslash there would paste the comment as arguments)
                code, comment = line.split(" # ", 1)
                indent = line[: len(line) - len(line.lstrip())]
                fitted.extend(_wrap(indent + "# " + comment.strip(), width))
                line = code.rstrip()
            fitted.extend(split_command(line, width) if command else _wrap(line, width))
        out.append("\b\n" + "\n".join(fitted))
    return "\n\n".join(out)


class HelpFormatter(click.HelpFormatter):
    def write_text(self, text: str) -> None:
        super().write_text(fit_verbatim(text, self.width - self.current_indent))


class HelpContext(click.Context):
    formatter_class = HelpFormatter


def adopt(command: click.Command) -> click.Command:
    """Give ``command`` (and a group's subcommands) the fitted help."""
    command.context_class = HelpContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            adopt(sub)
    return command
