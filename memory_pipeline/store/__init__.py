"""The source of truth: documents, chunks, tags, vectors, index versions."""

from memory_pipeline.store.store import Store, content_sha, now_utc

__all__ = ["Store", "content_sha", "now_utc"]
