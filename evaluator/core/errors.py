"""Typed exceptions. Library code raises these; the CLI turns them into one-line messages.

Exit codes: 0 success, 1 error (every class here), 2 a release gate failed.
"""


def first_line(exc: BaseException, fallback: str | None = None) -> str:
    """The first line of an exception's message (database errors carry DETAIL/HINT lines), or
    ``fallback`` (default: the exception's class name) when the message is empty."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else (fallback if fallback is not None else exc.__class__.__name__)


class PgevalError(Exception):
    """Base class of every error pgeval reports to a user (exit code 1)."""

    exit_code = 1


class InputError(PgevalError):
    """Bad user input: a file, a line, a field. The message names all three where known."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ):
        where = []
        if file is not None:
            where.append(str(file) if line is None else f"{file}:{line}")
        if field is not None:
            where.append(f"field '{field}'")
        self.file, self.line, self.field = file, line, field
        self.detail = message
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class NotFound(PgevalError):
    """A named object (test set, run, target, experiment) does not exist."""


class Conflict(PgevalError):
    """A name is taken by something with different content (use --replace)."""


class DatabaseError(PgevalError):
    """The database refused or could not be reached; the message never carries a password."""


class PlanError(PgevalError):
    """The planner did not choose the index the stage is meant to measure."""


class IncompleteRun(PgevalError):
    """A run that is not complete was asked for metrics (use --allow-partial)."""


class GateFailed(PgevalError):
    """A release gate failed (exit code 2)."""

    exit_code = 2
