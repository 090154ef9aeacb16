"""Ingestion: documents read once → chunk → embed what no vector exists for yet → store.

``Ingestor`` is the one ingestion path (``MemorySystem`` holds one and delegates to it, as
it does searches to ``search.pipeline.HybridSearcher``): it plans which documents need
work, embeds their new chunks in batches across documents (reusing vectors already stored
for the same text and model), and stores each document in its own transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.exc import IntegrityError

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.chunking import chunk_document
from memory_pipeline.ingest.dates import date_for_existing, derive_source_date
from memory_pipeline.ingest.loaders import (
    LoadedDocument,
    load_file,
    load_text,
    normalized_content_hash,
)
from memory_pipeline.ingest.turns import chunk_turns
from memory_pipeline.metadata import ChunkMetadata, validate_metadata
from memory_pipeline.spaces import DEFAULT_SPACE, doc_id_in_space
from memory_pipeline.store import Store, content_sha, now_utc
from memory_pipeline.types import DocumentInfo, IngestResult, NewChunk

if TYPE_CHECKING:
    from memory_pipeline.embedding.base import Embedder
    from memory_pipeline.hygiene.redactor import Redactor
    from memory_pipeline.ingest.settings import IngestSettings

# A per-document embedding bar only for long documents; the ingest bar covers the rest.
_EMBED_BAR_MIN = 128
_FRONT_MATTER_FIELDS = ("knowledge_type", "importance", "tags", "source_date", "title")


@dataclass(frozen=True)
class _Prepared:
    loaded: LoadedDocument  # redacted (ingest/redaction.py)
    meta: ChunkMetadata
    source_date_rule: str | None
    redactions: Counter[str]
    warnings: tuple[str, ...]


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


def doc_id_for(raw: bytes, space: str = DEFAULT_SPACE) -> str:
    """Documents are named by their bytes (and their space): identical content, identical id."""
    return doc_id_in_space(hashlib.sha256(raw).hexdigest(), space)


class Ingestor:
    """The one ingestion path, for the store it was given (``MemorySystem.ingestor``)."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: IngestSettings,
        *,
        update_index: Callable[[], object],
        index_due: Callable[[], bool],
    ) -> None:
        """Writes documents to ``store`` (in the space it writes), embedded by
        ``embedder``, chunked as ``settings`` say; ``update_index`` publishes the index
        after an ingest that changed something, or when ``index_due`` says changes wait."""
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self._update_index = update_index
        self._index_due = index_due

    @functools.cached_property
    def redactor(self) -> Redactor:
        """What every document passes through before it is stored (``HYBRID_RAG_REDACT``)."""
        return self.settings.redactor()

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
        loaded = [load_file(p, max_bytes=self.settings.max_file_bytes) for p in paths]
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
        if update_index and (any(r.status != "unchanged" for r in results) or self._index_due()):
            self._update_index()
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
        # Here, not at import: detect-secrets' 25 plugins load in 0.08 s, which a server
        # that only searches (or has not written yet) does not wait for.
        from memory_pipeline.ingest.redaction import redact_document, redact_metadata

        redactor = self.redactor
        kept, counts, warnings = redact_document(loaded, redactor)
        meta = redact_metadata(meta, redactor, kept.source)
        return _Prepared(kept, meta, rule.value if rule else None, counts, warnings)

    def _plan(self, prepared: Sequence[_Prepared]) -> list[_Planned | IngestResult]:
        """Each document chunked, or its result when it is already stored (nothing to do)."""
        out: list[_Planned | IngestResult] = []
        seen: set[str] = set()
        for p in prepared:
            loaded = p.loaded
            doc_id = loaded.doc_id or doc_id_for(loaded.raw, self.store.spaces.write)
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
                        warnings=p.warnings,
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
        ingest = self.settings
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
        from memory_pipeline.hygiene.private import UNCLOSED

        counted = planned.prepared.redactions + Counter({UNCLOSED: len(planned.prepared.warnings)})
        try:
            stored = self.store.store_document(
                info, chunks, vectors, self.embedder.model_id, meta.tags, redactions=counted
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
                warnings=planned.prepared.warnings,
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
            redactions=dict(planned.prepared.redactions),
            warnings=planned.prepared.warnings,
        )

    def _vectors_for(
        self, chunks: Sequence[NewChunk], *, progress: bool
    ) -> tuple[np.ndarray, list[bool]]:
        """Vectors for ``chunks``, embedding only text this model has not embedded before
        (each distinct text once); also, per chunk, whether to report its vector as reused.

        A vector is reused from any space, but reported as reused only when a chunk the
        caller may read holds the text: otherwise the counts would tell the caller that
        another space stores it. Such a reuse reads as an embedding, as in an empty memory.
        A blended chunk's vector is reused for the same index text too, however it was made.
        """
        if not chunks:
            return np.zeros((0, 0), dtype=np.float32), []
        shas = [content_sha(c.indexed_text) for c in chunks]
        known = self.store.vectors_by_content(list(dict.fromkeys(shas)), self.embedder.model_id)
        todo: dict[str, int] = {}  # sha -> the first chunk holding it, for those to make
        for i, sha in enumerate(shas):
            if sha not in known:
                todo.setdefault(sha, i)
        blends = {i: chunks[i].blend for i in todo.values()}
        wanted = {}
        for i, blend in blends.items():
            wanted.update(
                dict.fromkeys((blend.own, *blend.around) if blend else (chunks[i].indexed_text,))
            )
        texts = list(wanted)
        embedded = dict(
            zip(
                texts,
                self.embedder.embed_documents(
                    texts, progress=progress and len(texts) >= _EMBED_BAR_MIN
                ),
                strict=True,
            )
        )
        fresh: dict[str, np.ndarray] = {}
        for sha, i in todo.items():
            blend = blends[i]
            if blend is None:
                fresh[sha] = embedded[chunks[i].indexed_text]
                continue
            vector = embedded[blend.own]
            if blend.around:
                vector = vector + blend.weight * np.mean(
                    [embedded[t] for t in blend.around], axis=0
                )
                vector = vector / np.linalg.norm(vector)
            fresh[sha] = vector
        dim = len(next(iter({**fresh, **known}.values())))
        self.store.check_model(self.embedder.model_id, int(dim))
        by_sha = {**known, **fresh}
        out = np.stack([np.asarray(by_sha[sha], dtype=np.float32) for sha in shas])
        told = self.store.readable_contents(known, self.embedder.model_id) if known else set()
        return out, [sha in told for sha in shas]
