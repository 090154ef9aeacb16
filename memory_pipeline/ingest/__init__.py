"""Ingest: load sources into LoadedDocument and cut them into token-budgeted chunks."""

from memory_pipeline.ingest.chunking import Chunk, chunk_document
from memory_pipeline.ingest.loaders import (
    DEFAULT_MAX_BYTES,
    SUPPORTED_SUFFIXES,
    LoadedDocument,
    load_file,
    load_text,
    normalized_content_hash,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SUPPORTED_SUFFIXES",
    "Chunk",
    "LoadedDocument",
    "chunk_document",
    "load_file",
    "load_text",
    "normalized_content_hash",
]
