"""The index backends by name, and what each needs installed (no imports of their clients)."""

from __future__ import annotations

DEFAULT_BACKEND = "local"
#: backend -> the optional extra that installs its client ('' when nothing extra is needed)
EXTRAS: dict[str, str] = {
    "local": "",
    "pgvector": "pgvector",
    "qdrant": "qdrant",
    "chroma": "chroma",
}
BACKENDS: tuple[str, ...] = tuple(EXTRAS)
#: pgvector's hnsw.ef_search for a search of up to this many results (more: top_n itself)
DEFAULT_EF_SEARCH = 100
#: qdrant without a server URL: Qdrant Edge (Qdrant's Rust engine, in-process) or
#: qdrant-client's pure-Python local mode; the module each imports
QDRANT_MODULES: dict[str, str] = {"edge": "qdrant_edge", "local": "qdrant_client"}
QDRANT_MODES: tuple[str, ...] = tuple(QDRANT_MODULES)
DEFAULT_QDRANT_MODE = "edge"
