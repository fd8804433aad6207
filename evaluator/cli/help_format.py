"""``--help`` that fits the terminal: click keeps a paragraph marked ``\\b`` exactly as written,
so help texts written at 100 columns came out up to 100 wide in an 80-column terminal. Here a
``\\b`` paragraph of plain prose is wrapped like any other (its line breaks were only the
author's), and a line of an example that is still too wide is continued on the next line at
its last ``--option`` (or space) that fits, with a shell continuation, so it still runs when
pasted."""

from __future__ import annotations

import inspect
import re

import click

CONTINUED = "    "  # a continued example line: four more spaces than the line it continues


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_command(line: str) -> bool:
    return line.lstrip().startswith(("pgeval ", "$ "))


def _is_prose(lines: list[str]) -> bool:
    """Lines of running text: none indented, none a list item or a command, no heading."""
    return bool(lines) and not any(
        line[:1].isspace()
        or line.lstrip().startswith(("- ", "* ", "$", "#", "|"))
        or _is_command(line)
        or line.rstrip().endswith(":")
        for line in lines
    )


def split_command(line: str, width: int) -> list[str]:
    """``line`` cut into lines of at most ``width`` (where a cut is possible: a word wider than
    the line stays whole, on a line of its own), each but the last ending in `` \\``, the others
    indented four spaces more than ``line``."""
    out: list[str] = []
    indent = line[: len(line) - len(line.lstrip())]
    while len(line) > width:
        lead = len(line) - len(line.lstrip())  # this line's own indent (a continuation's too)
        room = width - 2  # the " \" the cut line ends with
        cut = line.rfind(" --", lead + 1, room)
        if cut <= lead:
            cut = line.rfind(" ", lead + 1, room)
        if cut <= lead:  # its first word is wider than the line: cut after that word
            cut = line.find(" ", lead + 1)
        if cut <= lead:
            break  # one word left: as it is
        out.append(line[:cut].rstrip() + " \\")
        line = indent + CONTINUED + line[cut:].lstrip()
    out.append(line)
    return out


def _continues(group: list[str], line: str) -> bool:
    """Whether ``line`` goes on with ``group``: more of a sentence (unindented, after a line
    that does not end in ``:``), or an item's continuation (indented deeper than the item)."""
    first = group[0]
    if _is_command(line) or not line.strip():
        return False
    if _indent(first) == 0:
        return (
            _indent(line) == 0
            and not group[-1].rstrip().endswith(":")
            and not line.startswith(("- ", "* ", "|", "#"))
        )
    return _indent(line) > _indent(first)


def _hanging(group: list[str]) -> str:
    """The indent of an item's wrapped lines: its text column (``  term   text``), else its
    own continuation's, else two spaces in; a sentence's: none."""
    first = group[0]
    if _indent(first) == 0:
        return ""
    term = re.match(r"^(\s+\S+\s{2,})\S", first)
    if term:
        return " " * len(term.group(1))
    if len(group) > 1:
        return " " * _indent(group[1])
    return " " * (_indent(first) + 2)


def _reflow(group: list[str], width: int) -> list[str]:
    """A sentence or a list item as written when every line fits, else joined and wrapped at
    words at ``width``."""
    import textwrap

    if all(len(line) <= width for line in group):
        return group
    text = " ".join(line.strip() for line in group)
    indent = group[0][: _indent(group[0])]
    return (
        textwrap.wrap(
            text,
            width,
            initial_indent=indent,
            subsequent_indent=_hanging(group),
            break_long_words=False,
            break_on_hyphens=False,
        )
        or group
    )


def _fit_block(lines: list[str], width: int) -> list[str]:
    """A ``\\b`` block that is not plain prose: commands continued with a backslash (a comment
    after one on its own line above it), sentences and list items reflowed at words."""
    fitted: list[str] = []
    group: list[str] = []
    command = False  # within a command (its first line starts with pgeval)
    for line in lines:
        command = _is_command(line) or (command and bool(fitted) and fitted[-1].endswith("\\"))
        if command:
            fitted.extend(_reflow(group, width))
            group = []
            if len(line) > width and " # " in line:
                # a comment after a command: on its own line above it, never continued into
                # the command (a backslash there would paste the comment as arguments)
                code, comment = line.split(" # ", 1)
                indent = line[: _indent(line)]
                fitted.extend(_reflow([indent + "# " + comment.strip()], width))
                line = code.rstrip()
            fitted.extend(split_command(line, width))
        elif group and _continues(group, line):
            group.append(line)
        else:
            fitted.extend(_reflow(group, width))
            group = [line]
    fitted.extend(_reflow(group, width))
    return fitted


def fit_verbatim(text: str, width: int) -> str:
    """``text`` (a command's help) with its ``\\b`` paragraphs fitted to ``width``: plain prose
    rewrapped like any paragraph, the rest by :func:`_fit_block`."""
    out = []
    for para in text.split("\n\n"):
        if not para.startswith("\b\n"):
            out.append(para)
            continue
        lines = para[2:].splitlines()
        if _is_prose(lines):
            out.append(" ".join(line.strip() for line in lines))
            continue
        out.append("\b\n" + "\n".join(_fit_block(lines, width)))
    return "\n\n".join(out)


class HelpFormatter(click.HelpFormatter):
    def write_text(self, text: str) -> None:
        super().write_text(fit_verbatim(text, self.width - self.current_indent))


class HelpContext(click.Context):
    formatter_class = HelpFormatter


SUMMARY_MAX = 160  # characters of a summary before a long list after its colon is left out


def first_sentence(help_text: str | None) -> str:
    """A command's summary in its group's list: the first sentence of its help, whole (the
    list wraps it), never cut mid-phrase as click's 45-character default is."""
    paragraph = inspect.cleandoc(help_text or "").split("\n\n", 1)[0]
    text = " ".join(line.strip() for line in paragraph.splitlines() if line.strip() != "\b")
    end = re.search(r"\.(\s|$)", text)
    sentence = (text[: end.start()] if end else text).strip()
    if len(sentence) > SUMMARY_MAX and ": " in sentence:  # a list follows: its heading alone
        sentence = sentence.split(": ", 1)[0]
    return sentence


def adopt(command: click.Command) -> click.Command:
    """Give ``command`` (and a group's subcommands) the fitted help, and its summary in its
    group's list (:func:`first_sentence`)."""
    command.context_class = HelpContext
    if command.short_help is None and command.help:
        command.short_help = first_sentence(command.help)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            adopt(sub)
    return command
