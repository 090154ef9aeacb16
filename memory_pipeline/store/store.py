"""The store: every write and read of the source of truth goes through here.

Split by concern, one module each: documents, chunks and tags, vectors, the
index-change queue and versions, reports, forgetting and restoring, merging spaces.
"""

from __future__ import annotations

from memory_pipeline.store.changes import ChangeQueries, PendingChanges, Reads
from memory_pipeline.store.chunks import ChunkQueries
from memory_pipeline.store.documents import DocumentQueries, StoredDocument
from memory_pipeline.store.forgetting import ForgettingQueries
from memory_pipeline.store.handed import HandedQueries
from memory_pipeline.store.history import HistoryQueries
from memory_pipeline.store.merging import MergeQueries
from memory_pipeline.store.redactions import RedactionQueries
from memory_pipeline.store.reports import ReportQueries
from memory_pipeline.store.rows import content_sha, now_utc
from memory_pipeline.store.scrubbing import ScrubQueries
from memory_pipeline.store.space_roots import SpaceRootQueries, SpaceSummary
from memory_pipeline.store.vectors import VectorQueries

__all__ = [
    "PendingChanges",
    "Reads",
    "SpaceSummary",
    "Store",
    "StoredDocument",
    "content_sha",
    "now_utc",
]


class Store(
    DocumentQueries,
    ChunkQueries,
    VectorQueries,
    ChangeQueries,
    ReportQueries,
    ForgettingQueries,
    RedactionQueries,
    SpaceRootQueries,
    HandedQueries,
    HistoryQueries,
    MergeQueries,
    ScrubQueries,
):
    """SQLAlchemy-backed store of documents, chunks, tags, vectors and index versions."""
