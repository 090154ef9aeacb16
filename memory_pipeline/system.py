"""MemorySystem: the library's front door. Adapters (CLI, MCP, Dagster) call only this."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import numpy as np

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import Embedder
from memory_pipeline.embedding.registry import embedder_for
from memory_pipeline.errors import InvalidInputError, NotFoundError
from memory_pipeline.index.backends import open_backend
from memory_pipeline.index.protocols import IndexView
from memory_pipeline.ingest.loaders import LoadedDocument
from memory_pipeline.ingest.pipeline import Ingestor
from memory_pipeline.ingest.pipeline import doc_id_for as doc_id_for  # re-exported for callers
from memory_pipeline.memory.axis import memory_rerank
from memory_pipeline.memory.duplicates import DuplicateReport, duplicate_audit
from memory_pipeline.memory.forgetting import ForgettingReport, run_forgetting_batch
from memory_pipeline.memory.health import HealthReport, index_health
from memory_pipeline.memory.restore import RestoreReport, restore_archived
from memory_pipeline.memory.scoring import MemoryFields, MemoryParams
from memory_pipeline.memory.stats import SystemStats, system_stats
from memory_pipeline.metadata import (
    ChunkMetadata,
    KnowledgeType,
    check_tag,
    check_text,
    check_texts,
    validate_metadata,
)
from memory_pipeline.search.cross_encoder import Reranker, load_reranker
from memory_pipeline.search.mmr import DEFAULT_MMR_LAMBDA
from memory_pipeline.search.params import DEFAULT_TOP_K
from memory_pipeline.search.pipeline import HybridSearcher
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.opening import Opening, open_store
from memory_pipeline.types import (
    ChunkRecord,
    IndexUpdateResult,
    IngestResult,
    SearchFilters,
    SearchHit,
    SearchResult,
)


def _check_doc_id(doc_id: object) -> None:
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    check_text("doc_id", doc_id)


class MemorySystem:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        spaces: Spaces | None = None,
        opening: Opening = Opening.WRITABLE,
        progress: bool = True,
    ) -> None:
        """``spaces`` binds the memory to the space it writes and those it reads (default:
        what the settings say); the store applies it to every query. ``opening``: whether
        the database must be writable (``store.read_only`` says how it was opened).
        ``progress``: show the bar of a model prepared on first use (the default model
        unpacked, exported)."""
        self.settings = settings
        self.spaces = spaces or settings.spaces()
        local = settings.index.backend == "local"
        self.store = open_store(
            settings.url, self.spaces, opening, index_folder=settings.index_path if local else None
        )
        self.embedder: Embedder = embedder or embedder_for(
            settings.embedding,
            lambda: [m for m in [self.store.some_model_id()] if m],
            progress=progress,
        )
        if reranker is not None:
            self.reranker: Reranker | None = reranker
            self.reranker_status = f"cross-encoder {reranker.name}"
        else:
            self.reranker, self.reranker_status = load_reranker(settings.embedding.reranker)
        self.backend = open_backend(
            settings.index, settings.index_path, self.store, self.embedder.model_id
        )
        self.reader = self.backend.source
        self.writer = self.backend.updater
        self._compose()

    def _compose(self) -> None:
        """The parts bound to this memory's store: its searcher and its ingestor."""
        self.searcher = HybridSearcher(
            self.store, self.reader, self.embedder, self.reranker, self.reranker_status
        )
        self.ingestor = Ingestor(
            self.store,
            self.embedder,
            self.settings.ingest,
            update_index=self.update_index,
            index_due=self.index_due,
        )

    def close(self) -> None:
        self.backend.close()
        self.store.close()

    def in_space(self, space: str) -> Self:
        """This memory writing to (and reading) ``space`` alone: the same database, index
        and models. For a caller that routes by space itself (a sources root that names
        its space); it shares this memory's connections, so close this one, not it."""
        if self.spaces == Spaces.bound(space):
            return self
        other = copy.copy(self)
        other.spaces = Spaces.bound(space)
        other.store = self.store.in_space(space)
        other._compose()
        return other

    # ------------------------------------------------------------------ ingest
    def ingest(
        self,
        paths: Sequence[str | Path],
        metadata: dict[str, Any] | None = None,
        *,
        update_index: bool = True,
        progress: bool = False,
    ) -> list[IngestResult]:
        """Ingest files. Every path and the metadata are checked before anything is written."""
        return self.ingestor.ingest(paths, metadata, update_index=update_index, progress=progress)

    def ingest_loaded(
        self,
        documents: Sequence[LoadedDocument],
        metadata: dict[str, Any] | ChunkMetadata | None = None,
        *,
        update_index: bool = True,
        progress: bool = False,
    ) -> list[IngestResult]:
        """The one ingestion path (``Ingestor.ingest_loaded``): documents read once → chunk
        → embed what no vector exists for yet → store, replacing older versions of each
        source. Files (``ingest``), texts (``ingest_text``), the source sync and the BEIR
        build all come here."""
        return self.ingestor.ingest_loaded(
            documents, metadata, update_index=update_index, progress=progress
        )

    def ingest_text(
        self,
        text: str,
        title: str,
        metadata: dict[str, Any] | None = None,
        *,
        update_index: bool = False,
    ) -> IngestResult:
        return self.ingestor.ingest_text(text, title, metadata, update_index=update_index)

    # ------------------------------------------------------------------ search
    def memory_params(
        self,
        time_weight: float | None = None,
        freq_weight: float | None = None,
        importance_threshold: float | None = None,
    ) -> MemoryParams:
        """The memory axis parameters: settings' defaults, overridden per call."""
        given: dict[str, Any] = {
            "time_weight": time_weight,
            "freq_weight": freq_weight,
            "importance_threshold": importance_threshold,
        }
        return replace(
            self.settings.memory_params(), **{k: v for k, v in given.items() if v is not None}
        )

    def query(
        self,
        query: str,
        top_k: int = DEFAULT_TOP_K,
        *,
        filters: SearchFilters | None = None,
        enable_mmr: bool = False,
        mmr_lambda: float = DEFAULT_MMR_LAMBDA,
        use_reranker: bool = True,
        record_access: bool = True,
        enable_memory_rerank: bool = False,
        memory_time_weight: float | None = None,
        memory_freq_weight: float | None = None,
        memory_importance_threshold: float | None = None,
        now: dt.datetime | None = None,
        rewrites: Sequence[str] = (),
    ) -> SearchResult:
        """Hybrid search; ``enable_memory_rerank`` adds guaranteed candidates and the memory axis.

        ``rewrites`` are other phrasings of the same question the caller wrote (synonyms,
        the names the memory may use, a question turned into a statement): each is
        searched too and all are fused into one ranking (``HybridSearcher.search``).
        A memory opened read-only records no access.
        """
        if isinstance(query, str):
            check_text("query", query, multiline=True)
        if filters is not None:
            check_texts("filters.tags", filters.tags)
            check_texts("filters.doc_ids", filters.doc_ids)
        params = self.settings.search_params(
            top_k=top_k,
            enable_mmr=enable_mmr,
            mmr_lambda=mmr_lambda,
            use_reranker=use_reranker,
            record_access=record_access and not self.store.read_only,
            enable_memory_rerank=enable_memory_rerank,
            memory=self.memory_params(
                memory_time_weight, memory_freq_weight, memory_importance_threshold
            ),
            now=now,
        )
        return self.searcher.search(query, filters, params, rewrites=rewrites)

    def rerank(
        self,
        chunks: Sequence[SearchHit],
        time_weight: float | None = None,
        freq_weight: float | None = None,
        importance_threshold: float | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> list[SearchHit]:
        """Apply the memory axis to hits a caller passes in (their ``score`` is the relevance)."""
        params = self.memory_params(time_weight, freq_weight, importance_threshold)
        kept, _cut = memory_rerank(
            [h.score for h in chunks],
            [
                MemoryFields(
                    h.knowledge_type, h.importance, h.access_count, h.created_at, h.source_date
                )
                for h in chunks
            ],
            params,
            now,
        )
        out = []
        for item in kept:
            hit = chunks[item.position]
            m = item.memory
            stages = {**hit.stage_scores, "relevance": hit.score, "decay": m.decay}
            stages.update(access_boost=m.boost, memory=m.score)
            out.append(replace(hit, score=float(m.score or 0.0), stage_scores=stages))
        return out

    hybrid_search = query

    def embed(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("text must be a non-empty string")
        return self.embedder.embed_query(text)

    # ------------------------------------------------------------------- index
    @property
    def model_id(self) -> str:
        """The embedding space this memory searches and writes in."""
        return self.embedder.model_id

    def counts(self) -> dict[str, int]:
        """Documents, chunks, … as stored (cheap: no index, no model)."""
        return self.store.counts()

    def waiting_for_index(self) -> int:
        """Stored chunks the published index has not taken in yet (searchable already)."""
        return len(self.store.pending_adds())

    def embedding_models(self) -> dict[str, tuple[int, int]]:
        """model id -> (dimension, vectors stored)."""
        return self.store.embedding_models()

    def published(self) -> IndexView | None:
        """The published index version as this memory's spaces see it (None before the
        first update)."""
        version = self.reader.current()
        return version.for_spaces(self.spaces.read) if version is not None else None

    def update_index(self) -> IndexUpdateResult:
        return self.writer.update()

    def rebuild_index(self) -> IndexUpdateResult:
        return self.writer.rebuild()

    def index_due(self) -> bool:
        """Changes are stored that the published index has not taken in yet.

        Such chunks are searchable already (serving scores them directly); an
        update makes that cheap again. True after an ingest whose index update was
        skipped, failed or killed.
        """
        return self.store.last_change() > 0

    def backfill_source_date(self, *, apply: bool = False) -> list[tuple[str, str, str, str]]:
        """Fill ``source_date`` for documents without one (``Ingestor.backfill_source_date``)."""
        return self.ingestor.backfill_source_date(apply=apply)

    # -------------------------------------------------------------- forgetting
    def run_forgetting_batch(
        self,
        *,
        time_weight: float | None = None,
        freq_weight: float | None = None,
        importance_threshold: float | None = None,
        score_threshold: float | None = None,
        dry_run: bool = True,
        max_fraction: float | None = None,
        force: bool = False,
        now: dt.datetime | None = None,
        examples: int = 10,
        grace_days: float | None = None,
    ) -> ForgettingReport:
        """Score every live chunk on the memory axis; archive the low ones unless dry run.

        A threshold, fraction or grace left unset is the configured one
        (``settings.forgetting``).
        """
        configured = self.settings.forgetting
        return run_forgetting_batch(
            self.store,
            self.writer,
            self.archive_file,
            self.embedder,
            self.memory_params(time_weight, freq_weight, importance_threshold),
            score_threshold=configured.score_threshold
            if score_threshold is None
            else score_threshold,
            dry_run=dry_run,
            max_fraction=configured.max_fraction if max_fraction is None else max_fraction,
            force=force,
            now=now,
            examples=examples,
            grace_days=configured.grace_days if grace_days is None else grace_days,
        )

    def restore_archived(
        self,
        *,
        run_id: str | None = None,
        doc_id: str | None = None,
        chunk_ids: Sequence[int] | None = None,
    ) -> RestoreReport:
        """Bring archived chunks back (one selector), re-using their archived vectors."""
        for name, value in (("run_id", run_id), ("doc_id", doc_id)):
            if isinstance(value, str):
                check_text(name, value)
        return restore_archived(
            self.store,
            self.writer,
            self.archive_file,
            self.embedder,
            run_id=run_id,
            doc_id=doc_id,
            chunk_ids=chunk_ids,
        )

    # ----------------------------------------------------------------- reports
    @property
    def archive_file(self) -> Path:
        return self.settings.archive_path / "chunks_archive.jsonl"

    def index_health(self) -> HealthReport:
        """Read-only consistency report of store, index, vectors and archive."""
        return index_health(
            self.store,
            self.reader,
            self.archive_file,
            self.embedder.model_id,
            self.embedder.dim,
            backend=self.backend.name,
        )

    def system_stats(self) -> SystemStats:
        return system_stats(
            self.store,
            self.reader,
            embedder_id=self.embedder.model_id,
            reranker_status=self.reranker_status,
            backend=self.backend.name,
        )

    def duplicate_audit(self, *, threshold: float = 0.95, max_pairs: int = 1000) -> DuplicateReport:
        """Groups of identical documents and near-identical chunk pairs; never deletes."""
        return duplicate_audit(
            self.store, self.embedder.model_id, threshold=threshold, max_pairs=max_pairs
        )

    # --------------------------------------------------------------- documents
    def delete_document(self, doc_id: str, *, update_index: bool = False) -> int:
        _check_doc_id(doc_id)
        removed = self.store.delete_document(doc_id)
        if update_index:
            self.update_index()
        return removed

    def get_document_chunks(
        self, doc_id: str, chunk_index: int | None = None, window: int = 1
    ) -> list[ChunkRecord]:
        _check_doc_id(doc_id)
        chunks = self.store.document_chunks(doc_id)
        if not chunks:
            raise NotFoundError(f"no document with doc_id {doc_id!r}")
        if chunk_index is None:
            return chunks
        if window < 0:
            raise InvalidInputError(f"window must be ≥ 0, got {window}")
        if not any(c.chunk_index == chunk_index for c in chunks):
            raise NotFoundError(
                f"document {doc_id!r} has chunks 0..{len(chunks) - 1}, not {chunk_index}"
            )
        return [c for c in chunks if abs(c.chunk_index - chunk_index) <= window]

    def find_by_tag(self, tag: str) -> list[ChunkRecord]:
        return self.store.find_by_tag(check_tag(tag))

    def set_chunk_tags(
        self,
        doc_id: str,
        chunk_index: int,
        *,
        importance: Any = ...,
        knowledge_type: Any = ...,
        tags: Sequence[str] | None = None,
    ) -> ChunkRecord:
        """Change memory fields of one chunk; takes effect in the next search, vectors untouched."""
        _check_doc_id(doc_id)
        raw: dict[str, Any] = {}
        if importance is not ...:
            raw["importance"] = importance
        if knowledge_type is not ...:
            raw["knowledge_type"] = knowledge_type
        if tags is not None:
            raw["tags"] = tags
        meta = validate_metadata(raw)
        kwargs: dict[str, Any] = {}
        if "importance" in raw:
            kwargs["importance"] = meta.importance
        if "knowledge_type" in raw:
            kt = meta.knowledge_type
            kwargs["knowledge_type"] = kt.value if isinstance(kt, KnowledgeType) else None
        return self.store.set_chunk_tags(
            doc_id, chunk_index, tags=list(meta.tags) if tags is not None else None, **kwargs
        )
