"""Where the index lives, chosen by ``HYBRID_RAG_INDEX_BACKEND`` (``names.BACKENDS``).

Every backend serves the same two seams: an ``IndexSource`` (what a search reads) and
an ``IndexUpdater`` (update, rebuild), so the whole search — fusion, guaranteed
candidates, the cross-encoder, the memory axis, MMR — runs unchanged on each. The
database stays the source of truth everywhere: vectors are stored there, and any
backend can be filled again from it (``rebuild-index``) without re-embedding.

* ``local``: FAISS segments and tantivy files in versioned folders (``local/``).
* ``pgvector``: inside the memory's PostgreSQL, written in the chunks' own transactions.
* ``qdrant``, ``chroma``: a vector service fed from the store's change queue (Qdrant: a
  server, or in-process Qdrant Edge or qdrant-client's local mode).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index.backends.names import EXTRAS, QDRANT_MODULES

if TYPE_CHECKING:
    from memory_pipeline.index.protocols import IndexSource, IndexUpdater
    from memory_pipeline.index.settings import IndexSettings
    from memory_pipeline.store import Store


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Backend:
    name: str
    source: IndexSource
    updater: IndexUpdater
    close: Callable[[], None] = _nothing  # releases the backend's clients


def require(module: str, backend: str) -> None:
    """Import ``module`` or say which extra installs it."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise IndexUnavailableError(
            f"the {backend} index backend needs the {module!r} package: "
            f"pip install 'memory-pipeline[{EXTRAS[backend]}]' (or HYBRID_RAG_INDEX_BACKEND=local)"
        ) from exc


def open_backend(index: IndexSettings, index_path: Path, store: Store, model_id: str) -> Backend:
    """The backend ``index`` configures over ``store`` for vectors of ``model_id``;
    ``index_path`` is the memory's index folder (the files of the local backend, the
    BM25 files and local-mode folders of the services)."""
    name = index.backend
    if name == "local":
        from memory_pipeline.index.backends.local.manager import IndexWriter
        from memory_pipeline.index.backends.local.reader import IndexReader

        if not store.read_only:
            index_path.mkdir(parents=True, exist_ok=True)
        writer = IndexWriter(
            store,
            index_path,
            model_id,
            ivf_threshold=index.ivf_threshold,
            dense_index=index.dense_index,
        )
        return Backend(name, IndexReader(index_path), writer)
    if name == "pgvector":
        require("pgvector", name)
        from memory_pipeline.index.backends.pgvector import PgVectorIndex

        pg = PgVectorIndex(store, model_id, ef_search=index.pgvector_ef_search)
        return Backend(name, pg, pg)
    if name == "qdrant":
        require("qdrant_client" if index.qdrant_url else QDRANT_MODULES[index.qdrant_mode], name)
        from memory_pipeline.index.backends.qdrant import open_qdrant

        qdrant = open_qdrant(index, index_path, store, model_id)
        return Backend(name, qdrant, qdrant, qdrant.close)
    if name == "chroma":
        require("chromadb", name)
        from memory_pipeline.index.backends.chroma import open_chroma

        chroma = open_chroma(index, index_path, store, model_id)
        return Backend(name, chroma, chroma, chroma.close)
    raise IndexUnavailableError(f"index backend {name!r} is not available yet")
