"""Targets: the user's table (columns, filters, presets) and its catalog."""
