"""Alembic environment for schema ``pgeval``. pgeval calls it with a live connection in
``config.attributes['connection']``; the version table lives in schema pgeval too."""

from alembic import context

SCHEMA = "pgeval"


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations through `pgeval init` (it supplies the connection)")
    context.configure(
        connection=connection,
        version_table_schema=SCHEMA,
        include_schemas=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
