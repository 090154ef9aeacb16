"""System stats: what the memory holds and how it is used (issue item 6). Read-only.

Every number is one aggregate query (GROUP BY / COUNT on Core selects), so the
cost stays flat in Python however many chunks the memory holds.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline import spool
from memory_pipeline.hygiene.private import UNCLOSED
from memory_pipeline.index.protocols import IndexSource
from memory_pipeline.memory.health import render_table
from memory_pipeline.store import Store

UNSET = "unset"
TOP_TAGS = 10
# (label, lowest access_count, highest or None): the buckets of the access distribution.
ACCESS_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("0", 0, 0),
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-9", 5, 9),
    ("10+", 10, None),
)


@dataclass
class KnowledgeTypeCount:
    knowledge_type: str  # "unset" when the source gave none
    documents: int
    chunks: int


@dataclass
class IndexInfo:
    version: int
    kind: str
    model_id: str
    dim: int
    n_dense: int
    n_sparse: int
    n_deleted: int
    created_at: str
    size_bytes: int
    backend: str = "local"  # where it lives (HYBRID_RAG_INDEX_BACKEND)


@dataclass
class SystemStats:
    documents: int
    chunks: int
    by_knowledge_type: list[KnowledgeTypeCount]
    importance_set: int
    tagged_chunks: int
    distinct_tags: int
    top_tags: list[tuple[str, int]]
    access_buckets: dict[str, int]
    total_accesses: int
    unindexed_chunks: int  # live chunks queued for the next update-index
    vectors_by_model: dict[str, int]
    index: IndexInfo | None
    embedder: str
    reranker: str  # "none" when no cross-encoder is in use
    reranker_status: str
    # The memory spaces these counts cover: where this memory writes, what it reads.
    spaces: str = "space 'default'"
    # What the redaction step took out before texts were kept, by kind (docs/hygiene.md).
    redactions: dict[str, int] = field(default_factory=dict)
    # Documents stored whole after an opening <private> they never close (ingest warned).
    unclosed_tags: int = 0
    # The capture folder: sessions waiting, set aside, and whether the worker could run.
    captures: dict[str, int] = field(default_factory=dict)
    generated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def importance_share(self) -> float:
        return self.importance_set / self.chunks if self.chunks else 0.0

    @property
    def tag_coverage(self) -> float:
        return self.tagged_chunks / self.chunks if self.chunks else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["generated_at"] = self.generated_at.isoformat()
        data["importance_share"] = round(self.importance_share, 4)
        data["tag_coverage"] = round(self.tag_coverage, 4)
        data["top_tags"] = [{"tag": t, "chunks": n} for t, n in self.top_tags]
        return data

    def render(self) -> str:
        idx = self.index
        lines = [
            f"{self.spaces}: documents {self.documents}, chunks {self.chunks} "
            f"({self.unindexed_chunks} waiting for update-index)",
            f"importance set on {self.importance_set} chunks ({self.importance_share:.0%}); "
            f"tagged {self.tagged_chunks} ({self.tag_coverage:.0%}), {self.distinct_tags} distinct tags",
            "index: none published; run update-index"
            if idx is None
            else f"index ({idx.backend}): version {idx.version} ({idx.kind}), {idx.n_dense} vectors, "
            f"{idx.n_sparse} BM25 docs, {idx.n_deleted} deleted, {_size(idx.size_bytes)}, "
            f"model {idx.model_id} (dim {idx.dim})",
            f"embedder: {self.embedder}",
            f"reranker: {self.reranker}"
            + ("" if self.reranker == self.reranker_status else f" ({self.reranker_status})"),
            "",
            render_table(
                ["knowledge_type", "documents", "chunks"],
                [
                    [k.knowledge_type, str(k.documents), str(k.chunks)]
                    for k in self.by_knowledge_type
                ],
            ),
            "",
            render_table(
                ["access_count", "chunks"], [[b, str(n)] for b, n in self.access_buckets.items()]
            ),
        ]
        if self.top_tags:
            lines += ["", render_table(["tag", "chunks"], [[t, str(n)] for t, n in self.top_tags])]
        taken = sum(self.redactions.values())
        lines += ["", f"redacted before storing: {taken}" + ("" if taken else " (nothing found)")]
        if taken:
            lines.append(
                render_table(
                    ["redacted", "times"], [[k, str(n)] for k, n in self.redactions.items()]
                )
            )
        if self.unclosed_tags:
            lines.append(
                f"documents stored whole after a <private> never closed: {self.unclosed_tags} "
                "(nothing after the tag dropped; ingest named each file and line)"
            )
        if self.captures:
            lines += ["", render_captures(self.captures)]
        return "\n".join(lines)


def render_captures(counts: dict[str, int]) -> str:
    """The capture folder's counts in a line, with what to run when something needs the user."""
    line = (
        f"captured sessions: {counts['waiting']} waiting, {counts['set_aside']} set aside"
        + (
            f", {counts['ledgers_set_aside']} ledgers set aside"
            if counts["ledgers_set_aside"]
            else ""
        )
        + ("; the worker could not run" if counts["worker_failed"] else "")
    )
    needs = counts["set_aside"] or counts["ledgers_set_aside"] or counts["worker_failed"]
    return line + (" (memory-pipeline capture --status)" if needs else "")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}"
    return f"{n} B"


def _reranker_in_use(status: str) -> bool:
    # load_reranker's statuses: "cross-encoder 'x' loaded (CPU)" when one is in use,
    # "no cross-encoder configured …" or "cross-encoder unavailable: …" when not.
    return status.startswith("cross-encoder ") and not status.startswith(
        "cross-encoder unavailable"
    )


def _by_knowledge_type(
    docs: dict[str | None, int], chunks: dict[str | None, int]
) -> list[KnowledgeTypeCount]:
    # Chunk-level overrides (set_chunk_tags) can name a type no document has, and vice versa.
    kinds = sorted(set(docs) | set(chunks), key=lambda k: (k is None, k or ""))
    return [KnowledgeTypeCount(k or UNSET, docs.get(k, 0), chunks.get(k, 0)) for k in kinds]


def _index_info(reader: IndexSource, backend: str) -> IndexInfo | None:
    loaded = reader.current()
    if loaded is None:
        return None
    m = loaded.manifest
    return IndexInfo(
        version=m.version,
        kind=m.kind,
        model_id=m.model_id,
        dim=m.dim,
        n_dense=m.n_dense,
        n_sparse=m.n_sparse,
        n_deleted=m.n_deleted,
        created_at=m.created_at,
        size_bytes=loaded.size_bytes(),
        backend=backend,
    )


def system_stats(
    store: Store,
    reader: IndexSource,
    *,
    embedder_id: str,
    reranker_status: str,
    backend: str = "local",
    capture_dir: Path | None = None,
) -> SystemStats:
    """Counts, coverage and usage of the memory plus what serves it, and the capture
    folder's counts when given; never writes."""
    counts = store.counts_report(ACCESS_BUCKETS, TOP_TAGS)
    in_use = _reranker_in_use(reranker_status)
    redactions = store.redaction_counts()
    unclosed = redactions.pop(UNCLOSED, 0)  # counted with them, though nothing was taken
    return SystemStats(
        documents=counts.documents,
        chunks=counts.chunks,
        by_knowledge_type=_by_knowledge_type(counts.documents_by_type, counts.chunks_by_type),
        importance_set=counts.importance_set,
        tagged_chunks=counts.tagged_chunks,
        distinct_tags=counts.distinct_tags,
        top_tags=counts.top_tags,
        access_buckets=counts.access_buckets,
        total_accesses=counts.total_accesses,
        unindexed_chunks=counts.unindexed_chunks,
        vectors_by_model=counts.vectors_by_model,
        index=_index_info(reader, backend),
        embedder=embedder_id or "none",
        reranker=reranker_status if in_use else "none",
        reranker_status=reranker_status or "none",
        spaces=store.spaces.describe(),
        redactions=redactions,
        unclosed_tags=unclosed,
        captures={} if capture_dir is None else spool.status(capture_dir).counts,
    )
