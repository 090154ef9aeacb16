"""Resources: the core library behind Dagster's configuration system.

Both are configured once, at the composition root, from the environment
(``MemoryResource.from_settings(Settings.from_env(env), database_url=dg.EnvVar(...))``);
nothing here reads the environment (Dagster resolves the ``EnvVar`` when a run starts).
"""

from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from memory_pipeline.config import Settings, variable
from memory_pipeline.sources.sources_file import SourcesConfig, load_sources
from memory_pipeline.sources.watch import WatchedStore
from memory_pipeline.spaces import Spaces
from memory_pipeline.store import Store
from memory_pipeline.system import MemorySystem

URL_VAR = variable("database_url")
KEY_VAR = variable("qdrant_api_key")


class MemoryResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The memory system — store, embedder, index — for one run or sensor tick.

    It holds the core's settings as ``HYBRID_RAG_*`` variables (those that differ from
    the defaults, so the UI shows what was configured) and reads them back with
    ``Settings.from_env``: every setting is carried, checked the same way, and no
    default is written here. The database URL and a Qdrant API key are fields of their
    own, given as ``dg.EnvVar`` by the composition root, so a secret never appears in the UI.

    ``system()`` builds the whole system (the embedder loads its model lazily, on
    first use); ``store()`` is the database alone, for assets and checks that read it;
    ``watched()`` is the narrow view of it that sensors ask (``WatchedStore``).
    """

    database_url: str | None = None
    qdrant_api_key: str | None = None
    variables: dict[str, str] = Field(
        default_factory=dict, description="HYBRID_RAG_* settings (see the README), by name"
    )

    _system: MemorySystem | None = PrivateAttr(default=None)
    _store: Store | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        database_url: str | dg.EnvVar | None = None,
        qdrant_api_key: str | dg.EnvVar | None = None,
    ) -> "MemoryResource":
        """``database_url`` and ``qdrant_api_key`` (e.g. ``dg.EnvVar(...)``) replace the
        settings' own."""
        url = database_url if database_url is not None else settings.database_url
        key = qdrant_api_key if qdrant_api_key is not None else settings.index.qdrant_api_key
        return cls(database_url=url, qdrant_api_key=key, variables=settings.to_env())

    def settings(self) -> Settings:
        secrets = {}
        for var, raw in ((URL_VAR, self.database_url), (KEY_VAR, self.qdrant_api_key)):
            if isinstance(raw, dg.EnvVar):  # not yet resolved (outside a run): as Dagster does
                raw = raw.get_value()
            if raw:
                secrets[var] = raw
        return Settings.from_env({**self.variables, **secrets})

    def spaces(self) -> Spaces:
        """The one space binding of this resource (``HYBRID_RAG_SPACE``, ``..._READ_SPACES``):
        ``system()`` (from the same settings) and ``store()`` (so ``watched()``) all open
        theirs with it, so what a run writes is where a sensor or a check looks."""
        return self.settings().spaces()

    def system(self) -> MemorySystem:
        if self._system is None:
            self._system = MemorySystem(self.settings())
        return self._system

    def store(self) -> Store:
        if self._system is not None:
            return self._system.store
        if self._store is None:
            self._store = Store(self.settings().url, spaces=self.spaces())
        return self._store

    def watched(self) -> WatchedStore:
        """What a sensor may ask of the store: the source files' documents and the queue of
        index changes, bound to the same spaces as ``store()`` and ``system()``."""
        return self.store()

    def teardown_after_execution(self, context: Any) -> None:
        if self._system is not None:
            self._system.close()
            self._system = None
        if self._store is not None:
            self._store.close()
            self._store = None


class SourcesResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The sources file: the roots that feed the memory (see ``memory_pipeline.sources``)."""

    sources_file: str | None = None

    def config(self) -> SourcesConfig | None:
        """The parsed sources file, or None when none is configured."""
        return load_sources(self.sources_file) if self.sources_file else None
