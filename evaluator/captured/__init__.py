"""The application's own queries, captured from PostgreSQL's server log (`pgeval queries`).

``log_entries`` reads log files (stderr with the server's ``log_line_prefix``, csvlog, jsonlog;
plain or gzip) into entries; ``searches`` finds the statements that order the target's vector
column by a distance operator under a LIMIT and turns each into its shape and parameters;
``store`` keeps a set of them in schema pgeval (``pgeval.captured_*``), from which sweeps, advise
and watch take the application's query vectors (``--captured SET``) and SQL's
``pgeval.evaluate_recall`` measures each shape as the application sends it.
"""
