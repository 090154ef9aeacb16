"""Tools that only read the memory: thin adapters over ``MemorySystem``.

Each public method is one MCP tool, declared read-only with ``@tool`` beside it
(listed in the order they are defined here): its signature is the tool's input schema, its
docstring the description the model reads, its return type the output schema.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

from pydantic import Field

from memory_pipeline.search.params import DEFAULT_TOP_K, day_start
from memory_pipeline.search.phrasings import MAX_REWRITES
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters, SearchHit
from serving.schemas import (
    MAX_EMBED_CHARS,
    MAX_QUERY_CHARS,
    MAX_RERANK,
    MCP_MAX_TOP_K,
    ChunkIn,
    ChunkOut,
    DocId,
    DocumentChunks,
    DocumentLabel,
    EmbedOutput,
    HealthReportOut,
    Hit,
    RerankOutput,
    SearchFiltersIn,
    SearchOutput,
    SearchStatsOut,
    SystemStatsOut,
    Tag,
    TaggedChunks,
    Weight,
)
from serving.toolspec import tool
from serving.wire import float32_list

log = logging.getLogger(__name__)

_TIME_WEIGHT = "share of the score given to freshness (decay by knowledge_type's half-life)"
_FREQ_WEIGHT = "share of the score given to how often a chunk was retrieved"
_IMPORTANCE = "chunks whose importance is below this are left out (unset importance passes)"
_REWRITES = (
    "your other phrasings of the question (synonyms, the memory's likely words); each is "
    "searched and all fused into one ranking, the query weighing as much as all of them"
)


class ReadTools:
    def __init__(self, system: MemorySystem, cwd: Path) -> None:
        self.system = system
        self.cwd = cwd

    def _shown(self, source: str) -> str:
        """A source as sent: one under the working directory is shown relative to it.

        That is the path a client passes to ``ingest``, and shorter to read and cite.
        """
        if source.startswith("text:"):
            return source
        path = Path(source)
        if path.is_absolute() and path.is_relative_to(self.cwd):
            return str(path.relative_to(self.cwd))
        return source

    def _hits(self, hits: Iterable[SearchHit]) -> list[Hit]:
        out = []
        for h in hits:
            hit = Hit.model_validate(h, from_attributes=True)
            if hit.source:
                hit.source = self._shown(hit.source)
            out.append(hit)
        return out

    def _labels(self, doc_ids: Iterable[str]) -> list[DocumentLabel]:
        """Each document's title and source, in the order given (those that exist)."""
        wanted = list(dict.fromkeys(doc_ids))
        labels = self.system.document_labels(wanted)
        return [
            DocumentLabel(doc_id=d, title=labels[d][0], source=self._shown(labels[d][1]))
            for d in wanted
            if d in labels
        ]

    @tool("Search memory", "read", core=True)
    def hybrid_search(
        self,
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)],
        rewrites: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]] | None,
            Field(max_length=MAX_REWRITES, description=_REWRITES),
        ] = None,
        tags: Annotated[
            list[Tag] | None,
            Field(max_length=20, description="only chunks with all these tags, e.g. project:x"),
        ] = None,
        filters: SearchFiltersIn | None = None,
        top_k: Annotated[
            int, Field(ge=1, le=MCP_MAX_TOP_K, description="chunks to return")
        ] = DEFAULT_TOP_K,
        include_stats: Annotated[
            bool, Field(description="also return timings and index diagnostics")
        ] = False,
        diversify: Annotated[
            bool, Field(description="prefer chunks that say different things (MMR)")
        ] = False,
        memory_rerank: Annotated[
            bool,
            Field(
                description="also weigh freshness, use and importance; always consider "
                "principles and important chunks"
            ),
        ] = False,
        now: Annotated[
            dt.date | None,
            Field(description="the date times in the query are read against (default: today)"),
        ] = None,
    ) -> SearchOutput:
        """Search the memory by meaning and keywords (dense and BM25 retrieval, fused).

        Best chunks first, each with doc_id and chunk_index (get_document_chunks reads
        around it), its document's title and source (a path, or text:<title>), and a
        conversation's turns. Finds text stored moments ago; counts an access per chunk.
        """
        f = filters or SearchFiltersIn()
        search_filters = SearchFilters(
            tags=tuple(dict.fromkeys([*f.tags, *(tags or [])])),
            knowledge_types=tuple(k.value for k in f.knowledge_types),
            doc_ids=tuple(f.doc_ids),
            created_after=f.created_after,
            created_before=f.created_before,
            source_date_from=f.source_date_from,
            source_date_to=f.source_date_to,
        )
        request = self.system.settings.search_request(
            top_k=top_k,
            enable_mmr=diversify,
            enable_memory_rerank=memory_rerank,
            now=None if now is None else day_start(now),
        )
        result = self.system.query(query, request, filters=search_filters, rewrites=rewrites or ())
        try:  # what the agent was handed, for the memory's pages; never fails the search
            self.system.note_handed("search", query=query, hits=result.hits)
        except Exception as exc:
            log.warning("the search was not noted for the memory's pages: %s", exc)
        stats = SearchStatsOut.model_validate(result.stats, from_attributes=True)
        return SearchOutput(
            chunks=self._hits(result.hits),
            stats=stats if include_stats else None,
        )

    @tool("Read a document's chunks", "read", core=True)
    def get_document_chunks(
        self,
        doc_id: DocId,
        chunk_index: Annotated[
            int | None, Field(ge=0, description="centre chunk; omit for the whole document")
        ] = None,
        window: Annotated[
            int, Field(ge=0, le=50, description="chunks on each side of chunk_index")
        ] = 1,
    ) -> DocumentChunks:
        """Read a document's chunks in order: all of them, or a window around one hit."""
        records = self.system.get_document_chunks(doc_id, chunk_index, window)
        label = next(iter(self._labels([doc_id])), None)
        return DocumentChunks(
            doc_id=doc_id,
            title=label.title if label else None,
            source=label.source if label else None,
            chunks=[ChunkOut.model_validate(r, from_attributes=True) for r in records],
        )

    @tool("Find chunks by tag", "read")
    def find_by_tag(
        self,
        tag: Tag,
        limit: Annotated[
            int, Field(ge=1, le=1000, description="most chunks, and most documents, to list")
        ] = 100,
    ) -> TaggedChunks:
        """List the chunks carrying a tag (exact match), by document and position, and their total.

        Also lists their documents (doc_id, title, source: the path ingest takes). Use
        before ingesting to see what is already stored, e.g. find_by_tag("summary_of:<id>").
        """
        records = self.system.find_by_tag(tag)
        doc_ids = list(dict.fromkeys(r.doc_id for r in records))
        return TaggedChunks(
            tag=tag.strip(),
            total=len(records),
            chunks=[ChunkOut.model_validate(r, from_attributes=True) for r in records[:limit]],
            documents=self._labels(doc_ids[:limit]),
            documents_total=len(doc_ids),
        )

    @tool("Re-rank on the memory axis", "read")
    def rerank(
        self,
        chunks: Annotated[list[ChunkIn], Field(min_length=1, max_length=MAX_RERANK)],
        time_weight: Annotated[Weight | None, Field(description=_TIME_WEIGHT)] = None,
        freq_weight: Annotated[Weight | None, Field(description=_FREQ_WEIGHT)] = None,
        importance_threshold: Annotated[Weight | None, Field(description=_IMPORTANCE)] = None,
    ) -> RerankOutput:
        """Re-order search hits on the memory axis: relevance, freshness, use and importance.

        Pass the chunks exactly as hybrid_search returned them; their `score` is
        taken as relevance. Unset weights use the server's defaults; time_weight +
        freq_weight must be at most 1. Chunks cut by importance are left out.
        """
        memory = self.system.settings.memory_params(
            time_weight=time_weight,
            freq_weight=freq_weight,
            importance_threshold=importance_threshold,
        )
        ranked = self.system.rerank([c.hit() for c in chunks], memory)
        return RerankOutput(chunks=self._hits(ranked))

    @tool("Embed text", "read")
    def embed(
        self, text: Annotated[str, Field(min_length=1, max_length=MAX_EMBED_CHARS)]
    ) -> EmbedOutput:
        """Embed a text as a query with the memory's embedding model (unit-length vector)."""
        vector = self.system.embed(text)
        return EmbedOutput(
            model_id=self.system.model_id, dim=len(vector), vector=float32_list(vector)
        )

    @tool("Check index health", "read")
    def index_health(self) -> HealthReportOut:
        """Audit the memory against its index (read-only): gaps, debris, vectors, archive.

        `healthy` is false when any finding has severity "error"; each finding's
        message says what to run to fix it.
        """
        return HealthReportOut.model_validate(self.system.index_health().to_dict())

    @tool("Memory statistics", "read")
    def get_system_stats(self) -> SystemStatsOut:
        """What the memory holds and how it is used: counts, tags, access, index, models."""
        return SystemStatsOut.model_validate(self.system.system_stats().to_dict())
