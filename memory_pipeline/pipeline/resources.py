"""Resources: the core library behind Dagster's configuration system.

Both are configured once, at the composition root, from the environment
(``MemoryResource.from_settings(Settings.from_env(env))``); nothing here reads
the environment.
"""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from memory_pipeline.config import Settings, default_cache_dir
from memory_pipeline.sources.config import SourcesConfig, load_sources
from memory_pipeline.store import Store
from memory_pipeline.system import MemorySystem


def _default(name: str) -> Any:
    """``Settings``' default for a field (read without building one: that reads the env)."""
    return Settings.__dataclass_fields__[name].default


class MemoryResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The memory system — store, embedder, index — for one run or sensor tick.

    ``system()`` builds the whole system (the embedder loads its model lazily, on
    first use); ``store()`` is the database alone, for sensors that only count.
    """

    # Defaults are the library's own (``Settings``), never written here again.
    db_path: str = str(_default("db_path"))
    index_path: str = str(_default("index_path"))
    archive_path: str = str(_default("archive_path"))
    database_url: str | None = None
    model: str = _default("model")
    model_cache: str | None = None
    reranker: str | None = None
    embed_batch_size: int = _default("embed_batch_size")
    max_chunk_size: int = _default("max_chunk_size")
    chunk_overlap: int = _default("chunk_overlap")
    max_file_bytes: int = _default("max_file_bytes")
    top_n: int = _default("top_n")
    fusion: str = _default("fusion")
    rrf_k: int = _default("rrf_k")
    ivf_threshold: int = _default("ivf_threshold")
    memory_time_weight: float = _default("memory_time_weight")
    memory_freq_weight: float = _default("memory_freq_weight")
    memory_importance_threshold: float = _default("memory_importance_threshold")
    # knowledge_type -> half-life in days (null: never decays)
    memory_half_life_overrides: dict[str, float | None] = Field(default_factory=dict)
    guaranteed_types: list[str] = Field(default_factory=lambda: list(_default("guaranteed_types")))
    guaranteed_importance_threshold: float = _default("guaranteed_importance_threshold")
    guaranteed_candidates_limit: int = _default("guaranteed_candidates_limit")

    _system: MemorySystem | None = PrivateAttr(default=None)
    _store: Store | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: Settings) -> "MemoryResource":
        return cls(
            db_path=str(settings.db_path),
            index_path=str(settings.index_path),
            archive_path=str(settings.archive_path),
            database_url=settings.database_url,
            model=settings.model,
            model_cache=str(settings.model_cache),
            reranker=settings.reranker,
            embed_batch_size=settings.embed_batch_size,
            max_chunk_size=settings.max_chunk_size,
            chunk_overlap=settings.chunk_overlap,
            max_file_bytes=settings.max_file_bytes,
            top_n=settings.top_n,
            fusion=settings.fusion,
            rrf_k=settings.rrf_k,
            ivf_threshold=settings.ivf_threshold,
            memory_time_weight=settings.memory_time_weight,
            memory_freq_weight=settings.memory_freq_weight,
            memory_importance_threshold=settings.memory_importance_threshold,
            memory_half_life_overrides=dict(settings.memory_half_life_overrides),
            guaranteed_types=list(settings.guaranteed_types),
            guaranteed_importance_threshold=settings.guaranteed_importance_threshold,
            guaranteed_candidates_limit=settings.guaranteed_candidates_limit,
        )

    def settings(self) -> Settings:
        return Settings(
            db_path=Path(self.db_path),
            index_path=Path(self.index_path),
            archive_path=Path(self.archive_path),
            database_url=self.database_url,
            model=self.model,
            model_cache=Path(self.model_cache) if self.model_cache else default_cache_dir(),
            reranker=self.reranker,
            embed_batch_size=self.embed_batch_size,
            max_chunk_size=self.max_chunk_size,
            chunk_overlap=self.chunk_overlap,
            max_file_bytes=self.max_file_bytes,
            top_n=self.top_n,
            fusion=self.fusion,
            rrf_k=self.rrf_k,
            ivf_threshold=self.ivf_threshold,
            memory_time_weight=self.memory_time_weight,
            memory_freq_weight=self.memory_freq_weight,
            memory_importance_threshold=self.memory_importance_threshold,
            memory_half_life_overrides=tuple(self.memory_half_life_overrides.items()),
            guaranteed_types=tuple(self.guaranteed_types),
            guaranteed_importance_threshold=self.guaranteed_importance_threshold,
            guaranteed_candidates_limit=self.guaranteed_candidates_limit,
        )

    def system(self) -> MemorySystem:
        if self._system is None:
            self._system = MemorySystem(self.settings())
        return self._system

    def store(self) -> Store:
        if self._system is not None:
            return self._system.store
        if self._store is None:
            self._store = Store(self.settings().url)
        return self._store

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
