"""Options declared once (sqlite-utils' shared option sets): an :class:`Opt` is one flag with its
type, default and help, declared in ``cli/flags.py``; an :class:`OptionGroup` is a few of them
under a heading (the query source, measuring, building, ...). A command composes the options and
groups it takes, as decorators, and gives a flag a help or default of its own with
:meth:`Opt.but`; no command declares a flag itself (``tests/test_architecture.py``). ``--help``
shows a :class:`GroupedCommand`'s options under their groups' headings."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Later:
    """A value read from the library when a command is built (its default, choices or a help
    listing kinds), so that importing the declarations reads none of it."""

    read: Callable[[], Any]


@dataclass(frozen=True)
class Opt:
    """One flag (``--set``), the name a command's function gets its value as (``settings``;
    None: click's, from the flag) and click's keyword arguments."""

    flag: str
    dest: str | None
    attrs: Mapping[str, Any]
    heading: str | None = None

    def but(self, dest: str | None = None, **attrs: Any) -> Opt:
        """The same flag as one command takes it: its own help, default, ..."""
        return replace(self, dest=dest or self.dest, attrs={**self.attrs, **attrs})

    def __call__(self, f: F) -> F:
        attrs = {k: v.read() if isinstance(v, Later) else v for k, v in self.attrs.items()}
        decls = (self.flag,) if self.dest is None else (self.flag, self.dest)
        return click.option(*decls, cls=GroupedOption, heading=self.heading, **attrs)(f)


def opt(flag: str, dest: str | None = None, **attrs: Any) -> Opt:
    return Opt(flag, dest, attrs)


@dataclass(frozen=True)
class OptionGroup:
    """Options shown under one heading. ``into``: the command gets their values as one dict of
    that name (the query source: a new source is one more option here, and reaches every command
    that takes the group)."""

    heading: str
    options: tuple[Opt, ...]
    into: str | None = None

    def but(self, flag: str, **attrs: Any) -> OptionGroup:
        """The group with one of its flags as a command takes it."""
        assert any(o.flag == flag for o in self.options), flag
        return replace(
            self, options=tuple(o.but(**attrs) if o.flag == flag else o for o in self.options)
        )

    def plus(self, *options: Opt) -> OptionGroup:
        return replace(self, options=self.options + options)

    def without(self, *flags: str) -> OptionGroup:
        return replace(self, options=tuple(o for o in self.options if o.flag not in flags))

    def __call__(self, f: F) -> F:
        names: list[str] = []  # the names click gives the group's values, once it has them
        target: Callable[..., Any] = f if self.into is None else _collecting(f, self.into, names)
        for option in reversed(self.options):
            target = replace(option, heading=self.heading)(target)
        params = getattr(target, "__click_params__", [])
        names.extend(str(p.name) for p in params[len(params) - len(self.options) :])
        return target  # type: ignore[return-value]


def group(heading: str, *options: Opt, into: str | None = None) -> OptionGroup:
    return OptionGroup(heading, options, into)


def _collecting(f: Callable[..., Any], into: str, names: list[str]) -> Callable[..., Any]:
    """``f`` called with the values of ``names`` as one dict ``into``."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs[into] = {name: kwargs.pop(name) for name in names}
        return f(*args, **kwargs)

    return wrapper


class GroupedOption(click.Option):
    """A click option that knows the heading it is shown under."""

    def __init__(self, *args: Any, heading: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heading = heading


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options under their groups' headings, in the order
    each group first appears, the others under "Options"; the help of every section in one
    column."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                heading = getattr(param, "heading", None) or "Options"
                sections.setdefault(heading, []).append(record)
        column = min(max(len(term) for rows in sections.values() for term, _ in rows), 30)
        for heading, records in sections.items():
            with formatter.section(heading):  # every section's help in one column
                here = min(max(len(term) for term, _ in records), 30)
                formatter.write_dl(records, col_spacing=2 + column - here)
