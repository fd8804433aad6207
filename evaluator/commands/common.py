"""Helpers shared by command modules."""

from __future__ import annotations

import functools

import click


def pass_db(f):
    """Inject the resolved :class:`evaluator.db.Database` as the first argument."""

    @click.pass_context
    @functools.wraps(f)
    def wrapper(ctx, *args, **kwargs):
        return f(ctx.obj.db, *args, **kwargs)

    return wrapper


def parse_list(value: str | None, cast=str, what: str = "value") -> list:
    """'3,5,10' -> [3, 5, 10]; raises a click error naming the bad item."""
    if value is None:
        return []
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(cast(item))
        except ValueError:
            raise click.BadParameter(f"'{item}' is not a valid {what}") from None
    return out
