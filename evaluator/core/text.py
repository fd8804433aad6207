"""Strings from a user's file: shown in one line in an error message, refused when PostgreSQL
cannot store them. Shared by the id rule (:mod:`evaluator.core.ids`) and the test-set fields."""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def show(value: object, limit: int = 80) -> str:
    """A user's value for an error message: one line (control characters escaped), shortened."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def clean_str(value: str, what: str) -> str:
    """Refuse strings PostgreSQL cannot store: NUL characters and lone surrogates (a JSON
    escape such as \\ud800 decodes to one)."""
    if "\x00" in value:
        raise ValueError(
            f"{what} contains a NUL character (\\u0000), which PostgreSQL cannot store"
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{what} contains a lone surrogate escape (e.g. \\ud800), "
                "which is not valid Unicode"
            ) from None
    return value


def kind_of(value: object) -> str:
    """What a JSON value is, for an error message (``found a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
