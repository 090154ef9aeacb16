"""The store's connection and transactions, which every query module builds on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from memory_pipeline.store.engine import create_engine, migrate, writer


class StoreBase:
    """An engine over one database (migrated on open), and the three ways to use it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_engine(url)
        self._writer = writer(self.engine)
        migrate(self.engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine) as session:
            yield session

    @contextmanager
    def conn(self) -> Iterator[sa.Connection]:
        """A plain connection for hot read paths (no ORM object construction)."""
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One transaction: everything inside commits together or not at all."""
        with Session(self._writer) as session, session.begin():
            yield session
