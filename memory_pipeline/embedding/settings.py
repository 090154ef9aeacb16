"""The ``embedding`` section of the settings: what ``registry.embedder_for`` is handed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import annotated_types
from pydantic import field_validator

from memory_pipeline import locations
from memory_pipeline.embedding.names import DEFAULT_BATCH_SIZE, DEFAULT_MODEL
from memory_pipeline.runtimes import AUTO, RUNTIMES
from memory_pipeline.sections import Section, no_placeholder, one_of, var


def default_cache_dir() -> Path:
    return locations.cache_dir() / "models"


class EmbeddingSettings(Section):
    model: str = var("EMBEDDING_MODEL", DEFAULT_MODEL)
    model_cache: Path = var("MODEL_CACHE", default_factory=default_cache_dir)
    _model_cache = field_validator("model_cache", mode="before")(no_placeholder)
    reranker: str | None = var("RERANKER_MODEL")
    embed_batch_size: Annotated[int, annotated_types.Ge(1)] = var(
        "EMBED_BATCH_SIZE", DEFAULT_BATCH_SIZE
    )
    # How the default model runs: onnx (ONNX Runtime, no torch), torch (sentence-
    # transformers), auto (a memory's own runtime; onnx for a new one). Other models: torch.
    runtime: str = var("EMBEDDING_RUNTIME", AUTO)
    # Threads of one ONNX Runtime forward pass (default: min(4, cores)).
    threads: Annotated[int, annotated_types.Ge(1)] | None = var("EMBEDDING_THREADS")

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return one_of("runtime", value, RUNTIMES)
