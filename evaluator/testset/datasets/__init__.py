"""Readers for public test collections (used by tests, benchmarks and `pgeval demo`)."""
