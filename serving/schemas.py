"""Pydantic models at the MCP boundary: bounded tool arguments and typed tool results.

Arguments are bounded so one call cannot ask for unbounded work or output; an
argument outside its bounds is refused by the SDK before the tool runs, with
the field named. Results mirror the library's dataclasses one to one (their
``to_dict()`` where they have one), so each tool publishes an output schema.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from memory_pipeline.metadata import MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS, KnowledgeType
from memory_pipeline.types import SearchHit, Turn
from serving.hints import McpText
from serving.wire import round_sig


def _as_utc(value: dt.datetime) -> dt.datetime:
    """Naive datetimes are taken as UTC, the store's clock."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


UTCDatetime = Annotated[dt.datetime, AfterValidator(_as_utc)]

MAX_QUERY_CHARS = 2_000
MAX_EMBED_CHARS = 20_000
MAX_TEXT_CHARS = 1_000_000
MAX_FILES = 100
MAX_RERANK = 200
# A tool result is read by a model: fewer hits than a library call may ask for.
MCP_MAX_TOP_K = 50

Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]
DocId = Annotated[str, Field(min_length=1, max_length=128)]
Weight = Annotated[float, Field(ge=0.0, le=1.0)]


class _Input(BaseModel):
    # A misspelt field is an error naming it, never silently ignored.
    model_config = ConfigDict(extra="forbid")


class SearchFiltersIn(_Input):
    """Applied before ranking; every given condition must hold."""

    tags: list[Tag] = Field(default_factory=list, max_length=20, description="all must be present")
    knowledge_types: list[KnowledgeType] = Field(
        default_factory=list, max_length=4, description="any of these"
    )
    doc_ids: list[DocId] = Field(default_factory=list, max_length=100)
    created_after: UTCDatetime | None = None
    created_before: UTCDatetime | None = None
    source_date_from: dt.date | None = None
    source_date_to: dt.date | None = None


class MetadataIn(_Input):
    # Every chunk of the ingested document inherits it (no docstring: the schema would
    # carry it to every turn, and "metadata" says as much).

    knowledge_type: KnowledgeType | None = Field(
        default=None, description="how the knowledge ages: principle never decays, news fastest"
    )
    importance: Weight | None = Field(default=None, description="0..1; unset = no opinion")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    source_date: dt.date | None = Field(
        default=None, description="when the knowledge was written (ages from here)"
    )
    title: str | None = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS)


class TurnIn(_Input):
    turn_id: str = Field(max_length=10_000)
    speaker: str = Field(max_length=10_000)
    said_at: UTCDatetime | None = None


class ChunkIn(_Input):
    # A search hit handed back for ``rerank`` (no docstring: it would be a schema description
    # repeating the tool's); ``score`` is its relevance.

    chunk_id: int
    doc_id: DocId
    chunk_index: int = Field(ge=0)
    content: str = Field(max_length=MAX_TEXT_CHARS)
    score: float
    created_at: UTCDatetime
    knowledge_type: KnowledgeType | None = None
    importance: Weight | None = None
    tags: list[str] = Field(default_factory=list, max_length=1000)
    access_count: int = Field(default=0, ge=0)
    source_date: dt.date | None = None
    stage_scores: dict[str, float | int | None] = Field(default_factory=dict)
    title: str | None = Field(default=None, max_length=10_000)
    source: str | None = Field(default=None, max_length=10_000)
    turns: list[TurnIn] = Field(default_factory=list, max_length=10_000)

    def hit(self) -> SearchHit:
        """The hit it was sent as: its fields are ``SearchHit``'s."""
        fields = self.model_dump(exclude={"turns"})
        fields["knowledge_type"] = self.knowledge_type.value if self.knowledge_type else None
        fields["turns"] = tuple(Turn(t.turn_id, t.speaker, t.said_at) for t in self.turns)
        return SearchHit(**fields)


# ----------------------------------------------------------------------------- results
# A result leaves out every field that holds its default (serving.wire.to_result): an
# unset importance or an empty tag list is simply absent, as the schema's default says.
Rounded = Annotated[float, AfterValidator(round_sig)]
#: A nested report that ``tools/list`` shows as just an object: opt-in diagnostics and the
#: index update a write may run. Its fields are still the model's, checked when a result
#: is built; the index update's are spelled out by update_index's own output schema, the
#: search stats' in docs/mcp.md. In full they cost every turn more than the tools' own
#: descriptions.
AnObject = WithJsonSchema({"type": "object"})


def _scores(scores: Any) -> Any:
    """Stage scores without the stages that did not run, floats to 4 significant digits."""
    if not isinstance(scores, dict):
        return scores  # the type check reports it
    return {
        k: round_sig(v) if isinstance(v, float) else v for k, v in scores.items() if v is not None
    }


StageScores = Annotated[dict[str, int | float], BeforeValidator(_scores)]


class TurnOut(BaseModel):
    turn_id: str
    speaker: str
    said_at: dt.datetime | None = None


_SOURCE = "its file path, or text:<title>"
_TURNS = "the conversation turns it holds (turn id, speaker, when it was said); none for documents"


class Hit(BaseModel):
    chunk_id: int
    doc_id: str
    chunk_index: int
    content: str
    title: str | None = Field(default=None, description="the document's title")
    source: str | None = Field(default=None, description=_SOURCE)
    knowledge_type: str | None = None
    importance: float | None = None
    tags: list[str] = []
    access_count: int = 0
    created_at: dt.datetime
    source_date: dt.date | None = None
    score: Rounded
    stage_scores: StageScores = {}
    turns: list[TurnOut] = Field(default=[], description=_TURNS)


class SearchStatsOut(BaseModel):
    timings_ms: dict[str, Rounded]
    orphan_index_entries: int = Field(description="index ids no longer live, dropped")
    duplicate_contents: int = Field(description="hits with identical text, collapsed")
    unindexed_searched: int = Field(description="chunks not yet in the index, scored directly")
    index_version: int | None = None
    candidates: int
    reranker: str
    guaranteed_added: int = 0
    importance_cut: int = 0
    notes: list[McpText] = []
    phrasings: int = Field(default=1, description="the query and the distinct rewrites searched")


class SearchOutput(BaseModel):
    chunks: list[Hit]
    stats: Annotated[SearchStatsOut, AnObject] | None = Field(
        default=None, description="only with include_stats"
    )


class RerankOutput(BaseModel):
    chunks: list[Hit] = Field(description="best first; chunks cut by importance are left out")


class EmbedOutput(BaseModel):
    model_id: str
    dim: int
    vector: list[float]


class IngestResultOut(BaseModel):
    source: str
    doc_id: str
    status: Literal["ingested", "unchanged", "replaced"]
    chunks: int
    embedded: int
    reused_vectors: int
    replaced_doc_id: str | None = None
    message: McpText


class IndexUpdateOut(BaseModel):
    version: int
    kind: Literal["update", "rebuild", "noop"]
    added: int
    removed: int
    n_dense: int
    n_sparse: int
    seconds: Rounded


class IngestOutput(BaseModel):
    results: list[IngestResultOut]
    index: Annotated[IndexUpdateOut, AnObject] | None = Field(
        default=None, description="the index update run after the ingest, if one ran"
    )
    index_error: McpText | None = Field(
        default=None,
        description="the ingest is stored and searchable; only the index update failed",
    )


class ChunkOut(BaseModel):
    id: int
    doc_id: str
    chunk_index: int
    content: str
    token_count: int
    knowledge_type: str | None = None
    importance: float | None = None
    tags: list[str] = []
    access_count: int = 0
    last_accessed_at: dt.datetime | None = None
    created_at: dt.datetime
    source_date: dt.date | None = None
    turns: list[TurnOut] = Field(default=[], description=_TURNS)


class DocumentLabel(BaseModel):
    doc_id: str
    title: str
    source: str = Field(description=_SOURCE)


class TaggedChunks(BaseModel):
    tag: str
    total: int = Field(description="chunks with the tag; at most `limit` are listed")
    chunks: list[ChunkOut]
    documents: list[DocumentLabel] = Field(
        description="the documents of all chunks with the tag; at most `limit` are listed"
    )
    documents_total: int


class DocumentChunks(BaseModel):
    doc_id: str
    title: str | None = None
    source: str | None = Field(default=None, description=_SOURCE)
    chunks: list[ChunkOut]


class DeleteOutput(BaseModel):
    doc_id: str
    chunks_removed: int
    index: Annotated[IndexUpdateOut, AnObject] | None = None
    index_error: McpText | None = None


# ------------------------------------------------------------ maintenance reports
class _Report(BaseModel):
    # Reports mirror the library's to_dict(); test_mcp_schemas checks none of its keys is lost.
    model_config = ConfigDict(extra="ignore")


class Candidate(_Report):
    chunk_id: int
    doc_id: str
    chunk_index: int
    knowledge_type: str | None = None
    score: Rounded | None = Field(default=None, description="absent when cut by importance")
    reason: str
    age_days: Rounded
    snippet: str


class ForgettingReportOut(_Report):
    run_id: str | None = Field(
        default=None, description="pass to restore_archived to undo a real run"
    )
    dry_run: bool
    params: dict[str, Any]
    live_chunks: int
    candidates: int
    archived: int
    limit: int
    refused: bool
    by_type: dict[str, dict[str, int]]
    examples: list[Candidate]
    archive_path: str
    index_version: int | None = None
    index_error: McpText | None = None
    timings_s: dict[str, Rounded]


class SkippedChunk(_Report):
    old_chunk_id: int
    doc_id: str
    chunk_index: int
    reason: McpText


class RestoreReportOut(_Report):
    selector: str
    selected: int
    restored: int
    reused_vectors: int
    reembedded: int
    documents_recreated: int
    new_ids: dict[str, int] = Field(description="old chunk id -> new chunk id")
    skipped: list[SkippedChunk] = []
    not_archived: list[int] = []
    index_version: int | None = None
    index_error: McpText | None = None
    seconds: Rounded


class HealthFinding(_Report):
    check: str
    severity: Literal["ok", "info", "warning", "error"]
    count: int = 0
    message: McpText
    examples: list[int | str] = []


class HealthReportOut(_Report):
    healthy: bool = Field(description="no finding of severity 'error'")
    findings: list[HealthFinding]
    checked_at: dt.datetime
    index_version: int | None = None
    timings: dict[str, Rounded]
    backend: str = Field(description="where the index lives: local, pgvector, qdrant or chroma")


class KnowledgeTypeCount(_Report):
    knowledge_type: str
    documents: int
    chunks: int


class IndexInfo(_Report):
    version: int
    kind: str
    model_id: str
    dim: int
    n_dense: int
    n_sparse: int
    n_deleted: int
    created_at: str
    size_bytes: int
    backend: str = Field(description="where the index lives: local, pgvector, qdrant or chroma")


class TagCount(_Report):
    tag: str
    chunks: int


class SystemStatsOut(_Report):
    documents: int
    chunks: int
    by_knowledge_type: list[KnowledgeTypeCount]
    importance_set: int
    importance_share: Rounded
    tagged_chunks: int
    tag_coverage: Rounded
    distinct_tags: int
    top_tags: list[TagCount]
    access_buckets: dict[str, int]
    total_accesses: int
    unindexed_chunks: int
    vectors_by_model: dict[str, int]
    index: IndexInfo | None = None
    embedder: str
    reranker: str
    reranker_status: McpText
    spaces: McpText  # the server's binding: the space it writes to, those it reads
    redactions: dict[str, int] = Field(
        default_factory=dict, description="secrets and private spans taken out before storing"
    )
    unclosed_tags: int = Field(
        default=0, description="documents stored whole after a <private> never closed"
    )
    captures: dict[str, int] = Field(
        default_factory=dict,
        description="captured sessions waiting and set aside; worker_failed 1 when the "
        "capture worker could not run",
    )
    generated_at: dt.datetime
