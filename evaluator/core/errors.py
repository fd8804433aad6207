"""Typed exceptions. Library code raises these; the CLI turns them into one-line messages.

Exit codes: 0 success, 1 error (every class here), 2 a release gate failed.
"""

from collections.abc import Callable


def first_line(exc: BaseException, fallback: str | None = None) -> str:
    """The first line of an exception's message (database errors carry DETAIL/HINT lines), or
    ``fallback`` (default: the exception's class name) when the message is empty."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else (fallback if fallback is not None else exc.__class__.__name__)


# A parameter named in a message is a reference, not text: ``param("id_column")`` is marked with
# two private-use characters, and each front end spells it when it prints the message (the
# Python API: `id_column`, `replace=True`; the command line: --id-column, --replace; one mapping
# each). Nothing parses prose: the marks say exactly where a parameter is.
_OPEN, _CLOSE = "\ue000", "\ue001"


def param(name: str, flag: bool | None = None) -> str:
    """Parameter ``name`` as a message or an error's ``field`` names it; ``flag``: a switch
    (``True``: ``replace=True`` / ``--replace``; ``False``: ``checksum=False`` /
    ``--no-checksum``)."""
    value = "" if flag is None else f"={flag}"
    return f"{_OPEN}{name}{value}{_CLOSE}"


def api_spelling(name: str, value: str | None) -> str:
    """How the Python API spells a parameter in a message: `id_column`, `replace=True`."""
    return f"`{name}={value}`" if value else f"`{name}`"


def spell(text: str, spelling: Callable[[str, str | None], str] = api_spelling) -> str:
    """``text`` with every :func:`param` reference spelled by ``spelling(name, value)``."""
    head, *parts = text.split(_OPEN)
    out = [head]
    for part in parts:
        ref, _, rest = part.partition(_CLOSE)
        name, _, value = ref.partition("=")
        out += [spelling(name, value or None), rest]
    return "".join(out)


def _bare(name: str, value: str | None) -> str:
    return name


class PgevalError(Exception):
    """Base class of every error pgeval reports to a user (exit code 1). Its message may name
    parameters (:func:`param`); ``str()`` spells them as the Python API does, :meth:`text` as a
    front end asks."""

    exit_code = 1

    def text(self, spelling: Callable[[str, str | None], str] | None = None) -> str:
        """The message with its parameters spelled by ``spelling(name, value)``."""
        return spell(Exception.__str__(self), spelling or api_spelling)

    def __str__(self) -> str:
        return self.text()


class InputError(PgevalError):
    """Bad user input: a file, a line, a field. The message names all three where known. The
    field may be a parameter (``field=param("id_column")``): ``field`` is then its name."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ):
        self.file, self.line = file, line
        self.field_ref = field  # as given (a parameter reference stays one)
        self.field = None if field is None else spell(field, _bare)
        self.detail = message
        super().__init__(message)

    def text(self, spelling: Callable[[str, str | None], str] | None = None) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file) if self.line is None else f"{self.file}:{self.line}")
        if self.field_ref is not None:  # a field is named bare by the API, as an option by the CLI
            where.append(f"field '{spell(self.field_ref, spelling or _bare)}'")
        detail = spell(self.detail, spelling or api_spelling)
        return f"{', '.join(where)}: {detail}" if where else detail


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


class GroupFailure:
    """One group of a per-group use case (a tenant of `pgeval watch --group-by`) that failed:
    its key (``{column: value}``) and pgeval's error."""

    def __init__(self, group: dict, error: PgevalError) -> None:
        self.group, self.error = dict(group), error

    @property
    def label(self) -> str:
        """``tenant=t3``"""
        return ", ".join(f"{c}={v}" for c, v in self.group.items())

    def text(self, spelling: Callable[[str, str | None], str] | None = None) -> str:
        """``tenant=t3: <the error's first line>``"""
        lines = self.error.text(spelling).strip().splitlines()
        return f"{self.label}: {lines[0] if lines else self.error.__class__.__name__}"


class GroupsFailed(PgevalError):
    """Some groups failed (``failures``, each naming its group); the others were measured
    (``results``, whatever the use case returns per group) but nothing of the whole is recorded.
    Exit code 1 (`pgeval watch` exits 2 when a measured group crossed a bound)."""

    def __init__(self, results: list, failures: list[GroupFailure], *, what: str = "") -> None:
        self.results = list(results)
        self.failures = list(failures)
        self.what = what  # what was not recorded: "no probe of this watch recorded"
        super().__init__(self.text())

    def text(self, spelling: Callable[[str, str | None], str] | None = None) -> str:
        total = len(self.results) + len(self.failures)
        head = f"{len(self.failures)} of {total} groups failed"
        return (
            head
            + (f", {self.what}" if self.what else "")
            + ": "
            + "; ".join(f.text(spelling) for f in self.failures)
        )
