"""Where the SQL API and the Alembic migrations live: inside the installed wheel
(``evaluator/sql``, ``evaluator/migrations``) or, in a source checkout, beside the package."""

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # the evaluator package


def _find(name: str) -> Path:
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pgeval installation is incomplete: no '{name}' directory near {_PKG}")


def sql_dir() -> Path:
    return _find("sql")


def migrations_dir() -> Path:
    return _find("migrations")


def sql_files() -> list[Path]:
    """Every SQL API file, in file-name order (the order they are applied in)."""
    return sorted(sql_dir().glob("*.sql"))
