"""Running: pipelines (experiments), resume, run import/export/list/delete."""
