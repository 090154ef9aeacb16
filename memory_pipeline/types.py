"""Named result types shared by the library, the CLI and the adapters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation, as a chunk that holds it knows it."""

    turn_id: str
    speaker: str
    said_at: dt.datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        at = self.said_at.isoformat() if self.said_at else None
        return {"turn_id": self.turn_id, "speaker": self.speaker, "said_at": at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        at = data.get("said_at")
        return cls(
            str(data["turn_id"]),
            str(data.get("speaker") or ""),
            dt.datetime.fromisoformat(at) if at else None,
        )


@dataclass(frozen=True)
class ChunkRecord:
    """A live chunk as stored in the database."""

    id: int
    doc_id: str
    chunk_index: int
    content: str
    token_count: int
    knowledge_type: str | None
    importance: float | None
    tags: tuple[str, ...]
    access_count: int
    last_accessed_at: dt.datetime | None
    created_at: dt.datetime
    source_date: dt.date | None
    space: str = "default"  # the memory space it belongs to (memory_pipeline/spaces.py)
    # What the indices hold for it when that is more than its content (a turn with its
    # context); None: the content itself.
    index_text: str | None = None
    turns: tuple[Turn, ...] = ()  # the conversation turns it holds, in order


@dataclass(frozen=True)
class Blend:
    """A chunk's vector made of several embeddings: that of ``own`` (the chunk's own
    lines) + ``weight`` × the mean of those of ``around`` (what surrounds it), normalised."""

    own: str
    around: tuple[str, ...]
    weight: float


@dataclass(frozen=True)
class NewChunk:
    """A chunk about to be stored (no id yet).

    ``content`` is what a search returns; ``index_text``, when given, is what is embedded
    and BM25-indexed instead (a conversation turn with its date, speaker and neighbours).
    ``blend``, when given, makes the vector from embeddings of parts instead of the
    index text whole (a conversation turn's own lines and its neighbours').
    """

    chunk_index: int
    content: str
    token_count: int
    index_text: str | None = None
    turns: tuple[Turn, ...] = ()
    blend: Blend | None = None

    @property
    def indexed_text(self) -> str:
        return self.index_text if self.index_text is not None else self.content


@dataclass(frozen=True)
class SearchFilters:
    """Filters applied before any top-N cut (DESIGN §2)."""

    tags: tuple[str, ...] = ()
    knowledge_types: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    source_date_from: dt.date | None = None
    source_date_to: dt.date | None = None

    def is_empty(self) -> bool:
        return self == SearchFilters()


@dataclass
class SearchHit:
    chunk_id: int
    doc_id: str
    chunk_index: int
    content: str
    knowledge_type: str | None
    importance: float | None
    tags: list[str]
    access_count: int
    created_at: dt.datetime
    source_date: dt.date | None
    score: float
    stage_scores: dict[str, float | int | None] = field(default_factory=dict)
    # The document's title and where it came from (a file path, or ``text:<title>``).
    title: str | None = None
    source: str | None = None
    turns: tuple[Turn, ...] = ()  # the conversation turns it holds (none for documents)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["turns"] = [t.to_dict() for t in self.turns]
        data["created_at"] = self.created_at.isoformat()
        data["source_date"] = self.source_date.isoformat() if self.source_date else None
        return data


@dataclass
class SearchStats:
    timings_ms: dict[str, float] = field(default_factory=dict)
    orphan_index_entries: int = 0
    duplicate_contents: int = 0
    unindexed_searched: int = 0
    index_version: int | None = None
    candidates: int = 0
    reranker: str = "none"
    guaranteed_added: int = 0
    importance_cut: int = 0
    notes: list[str] = field(default_factory=list)
    phrasings: int = 1  # the query and the distinct rewrites searched with it


@dataclass
class SearchResult:
    query: str
    hits: list[SearchHit]
    stats: SearchStats

    def context(self, max_chars: int = 4000) -> str:
        """The hits as one prompt-ready string, cut to a character budget."""
        parts: list[str] = []
        used = 0
        for rank, hit in enumerate(self.hits, 1):
            header = f"[{rank}] {hit.doc_id}#{hit.chunk_index}"
            if hit.knowledge_type:
                header += f" ({hit.knowledge_type})"
            block = f"{header}\n{hit.content.strip()}\n"
            if used + len(block) > max_chars:
                room = max_chars - used - len(header) - 5
                if room >= min(80, max_chars // 4):
                    parts.append(f"{header}\n{hit.content.strip()[:room]}…\n")
                break
            parts.append(block)
            used += len(block) + 1
        return "\n".join(parts)


@dataclass(frozen=True)
class IngestResult:
    source: str
    doc_id: str
    status: str  # "ingested" | "unchanged" | "replaced"
    chunks: int
    embedded: int
    reused_vectors: int
    replaced_doc_id: str | None = None
    message: str = ""
    # What the redaction step took out of the document stored, by kind (none when unchanged).
    redactions: Mapping[str, int] = field(default_factory=dict)
    # What the user must be told about the document: "source:line: …" for each opening
    # ``<private>`` it never closes (kept whole; ingest/redaction.py).
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexUpdateResult:
    version: int
    kind: str  # "update" | "rebuild" | "noop"
    added: int
    removed: int
    n_dense: int
    n_sparse: int
    seconds: float


@dataclass(frozen=True)
class DocumentInfo:
    """A document's row: identity, provenance and the metadata its chunks inherit."""

    doc_id: str
    source: str
    title: str
    fmt: str
    content_hash: str
    normalized_hash: str
    byte_size: int
    knowledge_type: str | None
    importance: float | None
    source_date: dt.date | None
    source_date_rule: str | None
    created_at: dt.datetime
    n_chunks: int = 0
