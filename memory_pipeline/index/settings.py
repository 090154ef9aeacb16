"""The ``index`` section of the settings: what ``backends.open_backend`` is handed
(with the index folder, ``Settings.index_path``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import annotated_types
from pydantic import field_validator

from memory_pipeline.index.backends.local.defaults import (
    DEFAULT_DENSE_INDEX,
    DEFAULT_IVF_THRESHOLD,
    DENSE_INDEXES,
)
from memory_pipeline.index.backends.names import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_EF_SEARCH,
    DEFAULT_QDRANT_MODE,
    QDRANT_MODES,
)
from memory_pipeline.sections import Section, no_placeholder, one_of, var


class IndexSettings(Section):
    # Where the index lives (memory_pipeline/index/backends): local (FAISS segments and
    # tantivy files beside the database), pgvector (inside its PostgreSQL), qdrant, chroma.
    backend: str = var("INDEX_BACKEND", DEFAULT_BACKEND)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, value: Any) -> Any:
        return one_of("backend", value, BACKENDS)

    # pgvector: candidates the HNSW graph search keeps (hnsw.ef_search; at least top_n).
    pgvector_ef_search: Annotated[int, annotated_types.Ge(1), annotated_types.Le(1000)] = var(
        "PGVECTOR_EF_SEARCH", DEFAULT_EF_SEARCH
    )
    # qdrant: a server's URL and API key; without a URL, the in-process engine qdrant_mode
    # names (edge: Qdrant Edge, Qdrant's Rust engine; local: qdrant-client's pure-Python
    # local mode) in qdrant_path (default <index folder>/qdrant-edge, or /qdrant for local).
    qdrant_url: str | None = var("QDRANT_URL")
    qdrant_api_key: str | None = var("QDRANT_API_KEY", repr=False)
    qdrant_mode: str = var("QDRANT_MODE", DEFAULT_QDRANT_MODE)

    @field_validator("qdrant_mode", mode="before")
    @classmethod
    def _qdrant_mode(cls, value: Any) -> Any:
        return one_of("qdrant_mode", value, QDRANT_MODES)

    qdrant_path: Path | None = var("QDRANT_PATH")
    # chroma: a server's URL (http://host:port); without one, an embedded store in chroma_path.
    chroma_url: str | None = var("CHROMA_URL")
    chroma_path: Path | None = var("CHROMA_PATH")
    _paths = field_validator("qdrant_path", "chroma_path", mode="before")(no_placeholder)
    # Collection names on a shared Qdrant or Chroma server (one memory each).
    collection: str = var("INDEX_COLLECTION", "memory_pipeline")
    # flat (every search exact), ivf or hnsw: the approximate index of a segment with at
    # least ivf_threshold vectors.
    dense_index: str = var("DENSE_INDEX", DEFAULT_DENSE_INDEX)

    @field_validator("dense_index", mode="before")
    @classmethod
    def _dense_index(cls, value: Any) -> Any:
        return one_of("dense_index", value, DENSE_INDEXES)

    ivf_threshold: Annotated[int, annotated_types.Ge(1)] = var(
        "IVF_THRESHOLD", DEFAULT_IVF_THRESHOLD
    )
