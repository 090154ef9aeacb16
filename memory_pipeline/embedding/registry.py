"""Embedders by name: the one place a configured model name becomes an embedder.

``hashing`` is the fast deterministic test embedder (not a semantic model); every
other name or path goes to sentence-transformers (the default model is unpacked
from its wheel). The CLI, the MCP server, Dagster and evaluation all build their
embedder here, through ``MemorySystem`` or directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_pipeline.embedding.base import Embedder, HashingEmbedder

if TYPE_CHECKING:
    from memory_pipeline.config import Settings

HASHING = "hashing"

#: Embedders chosen by exact name, before any sentence-transformers lookup.
NAMED: dict[str, Callable[[Settings], Embedder]] = {
    HASHING: lambda _settings: HashingEmbedder(),
}


def embedder_for(settings: Settings) -> Embedder:
    """The embedder ``settings.embedding.model`` names (loaded lazily where the model is heavy)."""
    named = NAMED.get(settings.embedding.model)
    if named is not None:
        return named(settings)
    from memory_pipeline.embedding.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        settings.embedding.model,
        cache_dir=settings.embedding.model_cache,
        batch_size=settings.embedding.embed_batch_size,
    )
