"""pgeval: SQL-native retrieval evaluation for RAG knowledge bases in PostgreSQL.

The import name is ``evaluator``; the distribution and the command are ``pgeval``.
Metrics are defined once, in the SQL files under ``sql/``; this package loads data,
runs stages and formats what the SQL computes.
"""

__version__ = "0.1.0"
