"""Errors of the API name its parameters: the one wrapper every method goes through."""

from __future__ import annotations

import functools
import re

from ..core.errors import InputError, PgevalError

# command-line option -> parameter of this API, where the name is not the option's own
_PARAMS = {
    "set": "settings",
    "opt": "options",
    "param": "params",
    "format": "format",
    "output": "format",
    "target": "target",
    "plot": "plot",
}
_FLAGS = {
    "replace",
    "allow-partial",
    "strict",
    "fresh",
    "batch",
    "server-timing",
    "isolate-index",
    "per-query",
    "by-type",
    "flagged",
    "plans",
}
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def _param(option: str) -> str:
    """'--id-column' -> 'id_column'; '--set' -> 'settings'."""
    name = option[2:] if option.startswith("--") else option
    return _PARAMS.get(name, name.replace("-", "_"))


def _in_message(match: re.Match) -> str:
    name = match.group(1)
    if name == "no-checksum":
        return "`checksum=False`"
    if name in _FLAGS:
        return f"`{_param(name)}=True`"
    return f"`{_param(name)}`"


def _renamed(exc: PgevalError) -> PgevalError:
    """The same error with the command line's option names replaced by this API's parameters."""
    if isinstance(exc, InputError):
        field = exc.field
        if field is not None and (field.startswith("--") or field.isupper()):
            field = _param(field.lower())
        return InputError(
            _OPTION.sub(_in_message, exc.detail), file=exc.file, line=exc.line, field=field
        )
    new = type(exc)(_OPTION.sub(_in_message, str(exc)))
    return new


def api(method):
    """Errors of ``method`` name parameters, not options."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.option_names:  # the command line's front end: its own options' names
            return method(self, *args, **kwargs)
        try:
            return method(self, *args, **kwargs)
        except PgevalError as exc:
            raise _renamed(exc) from None

    return wrapper


def cut_offs(values, what: str) -> list[int] | None:
    """``5`` or ``[1, 5]`` -> ``[5]`` / ``[1, 5]``; None stays None."""
    if values is None:
        return None
    if isinstance(values, int):
        return [values]
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise InputError(f"'{values}' is not a list of cut-offs", field=what) from None


def query_source(testset, sample_queries, seed, queries_sql, queries_file):
    """The query-vector source of the keywords (None: ``testset``); exactly one is given."""
    from ..testset.query_source import from_options

    return from_options(
        testset=testset,
        sample=sample_queries,
        seed=seed,
        queries_sql=queries_sql,
        queries_file=None if queries_file is None else str(queries_file),
    )
