"""The command line: the click group, one module per command, output formatting."""

from .main import COMMANDS, main

__all__ = ["COMMANDS", "main"]
