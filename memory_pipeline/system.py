"""MemorySystem: the library's front door. Adapters (CLI, MCP, Dagster) call only this."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import numpy as np

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import Embedder
from memory_pipeline.embedding.registry import embedder_for
from memory_pipeline.errors import InvalidInputError, MemoryPipelineError
from memory_pipeline.index.backends import open_backend
from memory_pipeline.index.protocols import IndexView
from memory_pipeline.ingest.loaders import LoadedDocument
from memory_pipeline.ingest.pipeline import Ingestor
from memory_pipeline.ingest.pipeline import doc_id_for as doc_id_for  # re-exported for callers
from memory_pipeline.memory.axis import rerank_hits
from memory_pipeline.memory.duplicates import DuplicateReport, duplicate_audit
from memory_pipeline.memory.forgetting import ForgettingReport, run_forgetting_batch
from memory_pipeline.memory.health import HealthReport, index_health
from memory_pipeline.memory.restore import RestoreReport, restore_archived
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.memory.scrub import Outcome as ScrubOutcome
from memory_pipeline.memory.space_merge import MergeReport, Progress, merge_spaces
from memory_pipeline.memory.stats import SystemStats, system_stats
from memory_pipeline.metadata import (
    ChunkMetadata,
    check_doc_id,
    check_tag,
    check_text,
    check_texts,
    memory_field_changes,
)
from memory_pipeline.search.cross_encoder import Reranker, load_reranker
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.search.pipeline import HybridSearcher
from memory_pipeline.spaces import Spaces
from memory_pipeline.store.history import Change
from memory_pipeline.store.opening import Opening, open_store
from memory_pipeline.types import (
    ChunkRecord,
    IndexUpdateResult,
    IngestResult,
    SearchFilters,
    SearchHit,
    SearchResult,
)


class MemorySystem:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        opening: Opening = Opening.WRITABLE,
        progress: bool = True,
    ) -> None:
        """The settings bind the memory to the space it writes and those it reads
        (``Settings.spaces``); the store applies it to every query, and ``bound`` gives
        this memory under another binding. ``opening``: whether
        the database must be writable (``store.read_only`` says how it was opened).
        ``progress``: show the bar of a model prepared on first use (the default model
        unpacked, exported)."""
        self.settings = settings
        self.spaces = settings.spaces()
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

    def bound(self, spaces: Spaces) -> Self:
        """This memory under another binding: the same database, index and models, writing
        and reading as ``spaces`` says (``Spaces.bound(space)``: one space alone;
        ``Spaces.everything()``: an operator's report across spaces). The one way to
        re-bind a memory, whose binding otherwise comes from its settings. The two share
        their connections: close one of them, once (closing either closes both)."""
        if spaces == self.spaces:
            return self
        other = copy.copy(self)
        other.spaces = spaces
        other.store = self.store.bound(spaces)
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
    def query(
        self,
        text: str,
        request: SearchRequest | None = None,
        *,
        filters: SearchFilters | None = None,
        rewrites: Sequence[str] = (),
    ) -> SearchResult:
        """Hybrid search for ``text``, as ``request`` says (None: the settings' defaults,
        ``Settings.search_request``); ``filters`` restrict it.

        ``rewrites`` are other phrasings of the same question the caller wrote (synonyms,
        the names the memory may use, a question turned into a statement): each is
        searched too and all are fused into one ranking (``HybridSearcher.search``).
        """
        if isinstance(text, str):
            check_text("query", text, multiline=True)
        if filters is not None:
            check_texts("filters.tags", filters.tags)
            check_texts("filters.doc_ids", filters.doc_ids)
        request = request or self.settings.search_request()
        return self.searcher.search(text, filters, request, rewrites=rewrites)

    def note_handed(
        self,
        kind: str,
        *,
        session: str | None = None,
        query: str | None = None,
        block: str | None = None,
        hits: Sequence[SearchHit] = (),
    ) -> None:
        """Keep what the memory gave an agent (``kind``: "recall", "prompt" or "search"), for the
        viewer's page of it: the query redacted as stored texts are, the hits by chunk.
        A memory opened read-only keeps nothing."""
        from memory_pipeline.store.handed import HandedHit

        if self.store.read_only:
            return
        if query:
            query = self.settings.ingest.redactor().redact(query).text
        named = [HandedHit(h.doc_id, h.chunk_index, h.score, h.title) for h in hits]
        self.store.record_handed(kind, session=session, query=query, block=block, hits=named)

    def rerank(
        self,
        chunks: Sequence[SearchHit],
        memory: MemoryParams | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> list[SearchHit]:
        """Apply the memory axis (None: as configured) to hits a caller passes in (their
        ``score`` is the relevance)."""
        return rerank_hits(chunks, memory or self.settings.memory_params(), now)

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
        memory: MemoryParams | None = None,
        score_threshold: float | None = None,
        dry_run: bool = True,
        max_fraction: float | None = None,
        force: bool = False,
        now: dt.datetime | None = None,
        examples: int = 10,
        grace_days: float | None = None,
        chosen: Sequence[int] | None = None,
    ) -> ForgettingReport:
        """Score every live chunk on the memory axis (None: as configured); archive the
        low ones unless dry run (only those in ``chosen``, when given: a person's pick). A
        threshold, fraction or grace left unset is the configured one
        (``settings.forgetting``)."""
        limits = self.settings.forgetting.limits(score_threshold, max_fraction, grace_days)
        memory = memory or self.settings.memory_params()
        parts = (self.store, self.writer, self.archive_file, self.embedder)
        return run_forgetting_batch(
            *parts,
            memory,
            dry_run=dry_run,
            force=force,
            now=now,
            examples=examples,
            chosen=chosen,
            **limits,
        )

    def restore_archived(
        self,
        *,
        run_id: str | None = None,
        doc_id: str | None = None,
        chunk_ids: Sequence[int] | None = None,
    ) -> RestoreReport:
        """Bring archived chunks back (one selector), re-using their archived vectors."""
        parts = (self.store, self.writer, self.archive_file, self.embedder)
        return restore_archived(*parts, run_id=run_id, doc_id=doc_id, chunk_ids=chunk_ids)

    def scrub(self, *, apply: bool = False, progress: Any = None) -> ScrubOutcome:
        """Find the secrets and private spans this memory already holds in the spaces it
        may change (``memory/scrub.py``); with ``apply``, take them out of every file."""
        from memory_pipeline.hygiene.redactor import Redactor
        from memory_pipeline.memory import scrub

        allow = self.settings.ingest.redactor().allow  # found even with redaction off
        where = scrub.Where(
            store=self.store,
            embedder=self.embedder,
            updater=self.writer,
            archive_file=self.archive_file,
            capture_dir=self.settings.capture_dir,
            redactor=Redactor(enabled=True, allow=allow),
            indexing=self.settings.ingest.turn_indexing(),
        )
        plan = scrub.scan(where, progress=progress)
        if not apply:
            return ScrubOutcome(plan, applied=False)
        return scrub.apply(where, plan, progress=progress)

    def merge_spaces(
        self, old: str, new: str, *, apply: bool = False, progress: Progress | None = None
    ) -> MergeReport:
        """Move space ``old``'s documents, forgotten chunks and redaction counts into space
        ``new`` (``memory.space_merge.merge_spaces``; a dry run unless ``apply``), then, if
        applied, update the index. Works across spaces whatever this memory is bound to."""
        report = merge_spaces(
            self.store, old, new, apply=apply, archive_path=self.archive_file, progress=progress
        )
        if not apply:
            return report
        try:
            return replace(report, index_version=self.update_index().version)
        except (MemoryPipelineError, OSError) as exc:  # the database is the truth; serving copes
            return replace(report, index_error=str(exc))

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
            capture_dir=self.settings.capture_dir,
        )

    def system_stats(self) -> SystemStats:
        return system_stats(
            self.store,
            self.reader,
            embedder_id=self.embedder.model_id,
            reranker_status=self.reranker_status,
            backend=self.backend.name,
            capture_dir=self.settings.capture_dir,
        )

    def duplicate_audit(self, *, threshold: float = 0.95, max_pairs: int = 1000) -> DuplicateReport:
        """Groups of identical documents and near-identical chunk pairs; never deletes."""
        return duplicate_audit(
            self.store, self.embedder.model_id, threshold=threshold, max_pairs=max_pairs
        )

    # --------------------------------------------------------------- documents
    def delete_document(
        self, doc_id: str, *, update_index: bool = False, actor: str = "api"
    ) -> int:
        """Delete a document (recorded with ``actor``: ``store/history.py``); chunks removed."""
        removed = self.store.delete_document(check_doc_id(doc_id), actor=actor)
        if update_index:
            self.update_index()
        return removed

    def get_document_chunks(
        self, doc_id: str, chunk_index: int | None = None, window: int = 1
    ) -> list[ChunkRecord]:
        """A document's chunks: all of them, or a window around one (``Store.document_window``)."""
        return self.store.document_window(check_doc_id(doc_id), chunk_index, window)

    def find_by_tag(self, tag: str) -> list[ChunkRecord]:
        return self.store.find_by_tag(check_tag(tag))

    def document_labels(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """doc_id -> (title, source) of those of the documents that exist."""
        return self.store.document_labels(doc_ids)

    def set_chunk_tags(
        self,
        doc_id: str,
        chunk_index: int,
        *,
        importance: Any = ...,
        knowledge_type: Any = ...,
        tags: Sequence[str] | None = None,
        actor: str = "api",
    ) -> ChunkRecord:
        """Change memory fields of one chunk; takes effect in the next search, vectors
        untouched; each change recorded with ``actor`` (``store/history.py``)."""
        check_doc_id(doc_id)
        changes = memory_field_changes(
            importance=importance, knowledge_type=knowledge_type, tags=tags
        )
        return self.store.set_chunk_tags(doc_id, chunk_index, **changes, actor=actor)

    def review_change(self, change_id: int, decision: str, *, actor: str = "api") -> Change:
        """A person's verdict on one of the agent's changes (``proposals``): ``accept``
        keeps it, ``revert`` sets the field back (recorded with ``actor``); takes effect
        in the next search (``store/chunks.py``)."""
        return self.store.review_change(change_id, decision, actor=actor)

    def proposals(self, limit: int = 50, offset: int = 0) -> list[Change]:
        """The agent's changes to chunks no person has accepted or reverted, newest first."""
        return self.store.proposals(limit, offset)

    def history(
        self, limit: int = 50, offset: int = 0, *, doc_id: str | None = None
    ) -> list[Change]:
        """The changes made to this memory's spaces, newest first (``store/history.py``)."""
        return self.store.history(limit, offset, doc_id=check_doc_id(doc_id) if doc_id else None)
