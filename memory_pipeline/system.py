"""MemorySystem: the library's front door. Adapters (CLI, MCP, Dagster) call only this."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import numpy as np
from sqlalchemy.exc import IntegrityError

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import Embedder
from memory_pipeline.embedding.registry import embedder_for
from memory_pipeline.errors import (
    InvalidInputError,
    NotFoundError,
    StorageError,
    StorageFailure,
)
from memory_pipeline.index.backends import open_backend
from memory_pipeline.index.protocols import IndexView
from memory_pipeline.ingest.chunking import chunk_document
from memory_pipeline.ingest.dates import date_for_existing, derive_source_date
from memory_pipeline.ingest.loaders import (
    LoadedDocument,
    load_file,
    load_text,
    normalized_content_hash,
)
from memory_pipeline.ingest.turns import chunk_turns
from memory_pipeline.memory.axis import memory_rerank
from memory_pipeline.memory.duplicates import DuplicateReport, duplicate_audit
from memory_pipeline.memory.forgetting import (
    ForgettingReport,
    run_forgetting_batch,
)
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
from memory_pipeline.spaces import DEFAULT_SPACE, Spaces, doc_id_in_space
from memory_pipeline.store import Store, content_sha, now_utc
from memory_pipeline.store.engine import sqlite_file
from memory_pipeline.store.failures import storage_error
from memory_pipeline.types import (
    ChunkRecord,
    DocumentInfo,
    IndexUpdateResult,
    IngestResult,
    NewChunk,
    SearchFilters,
    SearchHit,
    SearchResult,
)

log = logging.getLogger(__name__)

# A per-document embedding bar only for long documents; the ingest bar covers the rest.
_EMBED_BAR_MIN = 128
_FRONT_MATTER_FIELDS = ("knowledge_type", "importance", "tags", "source_date", "title")


@dataclass(frozen=True)
class _Prepared:
    loaded: LoadedDocument
    meta: ChunkMetadata
    source_date_rule: str | None


@dataclass(frozen=True)
class _Planned:
    """A new document, chunked, waiting for its vectors."""

    prepared: _Prepared
    doc_id: str
    content_hash: str
    chunks: list[NewChunk]


# New chunks embedded per call: large batches keep the model busy, small enough to store
# (and show progress) as the work goes on.
EMBED_GROUP = 256


def _embedding_groups(
    planned: Sequence[_Planned | IngestResult],
) -> Iterator[list[_Planned | IngestResult]]:
    """Consecutive runs of documents holding about EMBED_GROUP new chunks each."""
    group: list[_Planned | IngestResult] = []
    size = 0
    for item in planned:
        group.append(item)
        size += len(item.chunks) if isinstance(item, _Planned) else 0
        if size >= EMBED_GROUP:
            yield group
            group, size = [], 0
    if group:
        yield group


def _check_doc_id(doc_id: object) -> None:
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    check_text("doc_id", doc_id)


def doc_id_for(raw: bytes, space: str = DEFAULT_SPACE) -> str:
    """Documents are named by their bytes (and their space): identical content, identical id."""
    return doc_id_in_space(hashlib.sha256(raw).hexdigest(), space)


class Opening(StrEnum):
    """How a memory opens its database."""

    WRITABLE = "writable"  # every command that writes; a read-only file is an error
    READ_ONLY = "read_only"  # reports and searches that record nothing: never writes
    PREFER_WRITABLE = "prefer_writable"  # a search, a server: read-only if it must be


def _open_store(url: str, spaces: Spaces, opening: Opening) -> Store:
    if opening is not Opening.PREFER_WRITABLE:
        return Store(url, spaces=spaces, read_only=opening is Opening.READ_ONLY)
    try:
        return Store(url, spaces=spaces)
    except StorageError as exc:
        if exc.kind is not StorageFailure.READ_ONLY:
            raise
        log.info("opening the database read-only: %s", exc)
        return Store(url, spaces=spaces, read_only=True)


def _make_folder(path: Path, *, required: bool) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        error = storage_error(exc, f"the index folder {path}", "nothing was written yet")
        if error is None:
            raise
        if required or error.kind is not StorageFailure.READ_ONLY:
            raise error from exc


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
        db_file = sqlite_file(settings.url)
        if opening is Opening.READ_ONLY and (db_file is None or not db_file.exists()):
            opening = Opening.WRITABLE  # a new memory is made as any command would make it
        if settings.index.backend == "local" and opening is not Opening.READ_ONLY:
            # Its folder first: often beside the database, whose folder it may create.
            _make_folder(settings.index_path, required=opening is Opening.WRITABLE)
        self.store = _open_store(settings.url, self.spaces, opening)
        self.embedder: Embedder = embedder or embedder_for(
            settings, lambda: [m for m in [self.store.some_model_id()] if m], progress=progress
        )
        if reranker is not None:
            self.reranker: Reranker | None = reranker
            self.reranker_status = f"cross-encoder {reranker.name}"
        else:
            self.reranker, self.reranker_status = load_reranker(settings.embedding.reranker)
        self.backend = open_backend(settings, self.store, self.embedder.model_id)
        self.reader = self.backend.source
        self.writer = self.backend.updater
        self.searcher = HybridSearcher(
            self.store, self.reader, self.embedder, self.reranker, self.reranker_status
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
        other.searcher = HybridSearcher(
            other.store, self.reader, self.embedder, self.reranker, self.reranker_status
        )
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
        if isinstance(paths, str | Path):
            paths = [paths]
        if not paths:
            raise InvalidInputError("no paths given; pass one or more files to ingest")
        meta = validate_metadata(metadata)
        loaded = [load_file(p, max_bytes=self.settings.ingest.max_file_bytes) for p in paths]
        return self.ingest_loaded(loaded, meta, update_index=update_index, progress=progress)

    def ingest_loaded(
        self,
        documents: Sequence[LoadedDocument],
        metadata: dict[str, Any] | ChunkMetadata | None = None,
        *,
        update_index: bool = True,
        progress: bool = False,
    ) -> list[IngestResult]:
        """The one ingestion path: documents read once → chunk → embed what no vector
        exists for yet → store, replacing older versions of each source.

        Files (``ingest``), texts (``ingest_text``), the source sync and the BEIR build
        all come here. Every document's metadata and chunks are checked before anything
        is written; new chunks are embedded in batches across documents (each distinct
        text once), and each document is stored in its own transaction.
        """
        meta = validate_metadata(metadata)
        prepared = [self._prepare(doc, meta) for doc in documents]
        planned = self._plan(prepared)
        bar = None
        if progress and len(planned) > 1:
            from tqdm import tqdm

            bar = tqdm(total=len(planned), desc="ingest", unit="doc")
        results: list[IngestResult] = []
        for group in _embedding_groups(planned):
            fresh = [p for p in group if isinstance(p, _Planned)]
            vectors, reused = self._vectors_for(
                [c for p in fresh for c in p.chunks], progress=progress and bar is None
            )
            start = 0
            for item in group:
                if isinstance(item, _Planned):
                    n = len(item.chunks)
                    rows = vectors[start : start + n]
                    results.append(self._store_planned(item, rows, reused[start : start + n]))
                    start += n
                else:
                    results.append(item)
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        if update_index and (any(r.status != "unchanged" for r in results) or self.index_due()):
            self.update_index()
        return results

    def ingest_text(
        self,
        text: str,
        title: str,
        metadata: dict[str, Any] | None = None,
        *,
        update_index: bool = False,
    ) -> IngestResult:
        [result] = self.ingest_loaded([load_text(text, title)], metadata, update_index=update_index)
        return result

    def _prepare(self, loaded: LoadedDocument, explicit: ChunkMetadata) -> _Prepared:
        fm = {k: v for k, v in loaded.front_matter.items() if k in _FRONT_MATTER_FIELDS}
        if "date" in loaded.front_matter and "source_date" not in fm:
            fm["source_date"] = loaded.front_matter["date"]
        stamp = fm.get("source_date")
        if isinstance(stamp, dt.datetime):
            fm["source_date"] = stamp.date()
        try:
            from_file = validate_metadata(fm)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{loaded.source}: front matter — {exc}") from exc
        given = explicit.model_dump(exclude_unset=True)
        merged = {**from_file.model_dump(exclude_unset=True), **given}
        # Given metadata wins field by field, but tags add up: a caller's tags (a batch
        # label, a project) must not erase the ones the file carries.
        merged["tags"] = list(dict.fromkeys([*from_file.tags, *explicit.tags]))
        is_file = loaded.from_file
        day, rule = derive_source_date(
            explicit=explicit.source_date,
            front_matter=from_file.source_date,
            path=Path(loaded.source) if is_file else None,
            modified_at=loaded.modified_at,
        )
        merged["source_date"] = day
        meta = ChunkMetadata.model_validate(merged)
        return _Prepared(loaded, meta, rule.value if rule else None)

    def _plan(self, prepared: Sequence[_Prepared]) -> list[_Planned | IngestResult]:
        """Each document chunked, or its result when it is already stored (nothing to do)."""
        out: list[_Planned | IngestResult] = []
        seen: set[str] = set()
        for p in prepared:
            loaded = p.loaded
            doc_id = loaded.doc_id or doc_id_for(loaded.raw, self.spaces.write)
            content_hash = hashlib.sha256(loaded.raw).hexdigest()
            existing = self.store.get_document(doc_id)
            if existing is not None and existing.content_hash != content_hash:
                raise InvalidInputError(
                    f"{loaded.source}: doc_id {doc_id!r} is already stored with other "
                    "content; delete that document first"
                )
            if existing is not None or doc_id in seen:
                out.append(
                    IngestResult(
                        source=loaded.source,
                        doc_id=doc_id,
                        status="unchanged",
                        chunks=existing.n_chunks if existing else 0,
                        embedded=0,
                        reused_vectors=0,
                        message=f"identical content is already stored as {doc_id}; nothing to do",
                    )
                )
                continue
            seen.add(doc_id)
            chunks = self._chunks(loaded)
            if not chunks:
                raise InvalidInputError(f"{loaded.source}: no text to index after chunking")
            out.append(_Planned(p, doc_id, content_hash, chunks))
        return out

    def _chunks(self, loaded: LoadedDocument) -> list[NewChunk]:
        """A conversation by turn, with each turn's context in its index text; any other
        document by its structure."""
        ingest = self.settings.ingest
        if loaded.turns:
            return chunk_turns(
                loaded.turns,
                token_counter=self.embedder.count_tokens,
                max_chunk_size=ingest.max_chunk_size,
                indexing=ingest.turn_indexing(),
            )
        pieces = chunk_document(
            loaded.text,
            token_counter=self.embedder.count_tokens,
            max_chunk_size=ingest.max_chunk_size,
            overlap=ingest.chunk_overlap,
            fmt=loaded.fmt,
        )
        return [NewChunk(c.index, c.text, c.token_count) for c in pieces]

    def _store_planned(
        self, planned: _Planned, vectors: np.ndarray, reused: Sequence[bool]
    ) -> IngestResult:
        loaded, meta = planned.prepared.loaded, planned.prepared.meta
        doc_id, chunks = planned.doc_id, planned.chunks
        info = DocumentInfo(
            doc_id=doc_id,
            source=loaded.source,
            title=meta.title or loaded.title,
            fmt=loaded.fmt,
            content_hash=planned.content_hash,
            normalized_hash=normalized_content_hash(loaded.text),
            byte_size=len(loaded.raw),
            knowledge_type=meta.knowledge_type.value if meta.knowledge_type else None,
            importance=meta.importance,
            source_date=meta.source_date,
            source_date_rule=planned.prepared.source_date_rule,
            created_at=now_utc(),
        )
        try:
            stored = self.store.store_document(
                info, chunks, vectors, self.embedder.model_id, meta.tags
            )
        except IntegrityError:
            # PostgreSQL: another writer inserted the same bytes after our transaction began.
            if self.store.get_document(doc_id) is None:
                raise
            stored = None
        if stored is None:
            return IngestResult(
                source=loaded.source,
                doc_id=doc_id,
                status="unchanged",
                chunks=len(chunks),
                embedded=0,
                reused_vectors=0,
                message=f"identical content was stored concurrently as {doc_id}; nothing to do",
            )
        older = stored.replaced
        n_reused = sum(reused)
        return IngestResult(
            source=loaded.source,
            doc_id=doc_id,
            status="replaced" if older else "ingested",
            chunks=len(chunks),
            embedded=len(chunks) - n_reused,
            reused_vectors=n_reused,
            replaced_doc_id=older[-1] if older else None,
        )

    def _vectors_for(
        self, chunks: Sequence[NewChunk], *, progress: bool
    ) -> tuple[np.ndarray, list[bool]]:
        """Vectors for ``chunks``, embedding only text this model has not embedded before
        (each distinct text once); also, per chunk, whether to report its vector as reused.

        A vector is reused from any space, but reported as reused only when a chunk the
        caller may read holds the text: otherwise the counts would tell the caller that
        another space stores it. Such a reuse reads as an embedding, as in an empty memory.
        """
        if not chunks:
            return np.zeros((0, 0), dtype=np.float32), []
        shas = [content_sha(c.indexed_text) for c in chunks]
        known = self.store.vectors_by_content(list(dict.fromkeys(shas)), self.embedder.model_id)
        todo = [sha for sha in dict.fromkeys(shas) if sha not in known]
        first: dict[str, int] = {}
        for i, sha in enumerate(shas):
            first.setdefault(sha, i)
        texts = [chunks[first[sha]].indexed_text for sha in todo]
        fresh = self.embedder.embed_documents(
            texts, progress=progress and len(texts) >= _EMBED_BAR_MIN
        )
        dim = fresh.shape[1] if texts else next(iter(known.values())).shape[0]
        self.store.check_model(self.embedder.model_id, int(dim))
        by_sha = {**known, **dict(zip(todo, fresh, strict=True))}
        out = np.stack([np.asarray(by_sha[sha], dtype=np.float32) for sha in shas])
        told = self.store.readable_contents(known, self.embedder.model_id) if known else set()
        return out, [sha in told for sha in shas]

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
        """Fill ``source_date`` for documents without one, from their file name or mtime.

        Returns (doc_id, source, date, rule) for each document that would change;
        writes only with ``apply=True``.
        """
        plan = []
        for doc in self.store.documents_without_source_date():
            day, rule = date_for_existing(doc.source)
            if day is not None and rule is not None:
                plan.append((doc.doc_id, doc.source, day.isoformat(), rule.value))
        if apply:
            for doc_id, _source, day_iso, rule_value in plan:
                self.store.set_source_date(doc_id, dt.date.fromisoformat(day_iso), rule_value)
        return plan

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
