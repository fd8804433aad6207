"""The one mapping from the library's parameter names to the command line's options: an error
names ``settings`` (:func:`evaluator.core.errors.param`), the command line prints ``--set``."""

from __future__ import annotations

# a parameter whose option is not ``--`` + its name with '-' for '_'
OPTIONS = {
    "settings": "--set",
    "options": "--opt",
    "params": "--param",
    "moved_by": "--by",
    "null_true": "--null-as-true",
}


def option_for(name: str, value: str | None = None) -> str:
    """``id_column`` -> ``--id-column``; ``settings`` -> ``--set``; ``checksum`` given as False
    -> ``--no-checksum``."""
    option = OPTIONS.get(name) or "--" + name.replace("_", "-")
    return "--no-" + option[2:] if value == "False" else option
