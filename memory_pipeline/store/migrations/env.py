"""Alembic environment: always run programmatically by ``Store`` with a live connection."""

from __future__ import annotations

from alembic import context

from memory_pipeline.store.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only when someone runs the alembic CLI by hand
    raise RuntimeError(
        "run migrations through memory_pipeline.store.Store.open(), not the alembic CLI"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
