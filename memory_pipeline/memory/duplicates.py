"""Near-duplicate audit (issue item 7): report, never delete.

Two views: documents whose *normalised* text is identical (same
``normalized_hash``: NFKC, casefold, collapsed whitespace), and chunk pairs
whose stored vectors have cosine ≥ a threshold. Vectors come from the store
(never re-embedded); each chunk asks FAISS for its nearest few neighbours in
batches — exact inner product up to ``exact_limit`` vectors, IVF beyond
(DESIGN §2) — so the cost is n·k, not n².
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import faiss
import numpy as np

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.health import render_table
from memory_pipeline.store import Store

NEIGHBOURS = 5
QUERY_BATCH = 4096
# Batched exact search runs 7–8x faster through BLAS; FAISS only uses it from 128k queries on.
BLAS_THRESHOLD = 16
# Near-duplicates sit in the same or a neighbouring cell; a small nprobe keeps a 1M audit in minutes.
IVF_NPROBE = 8
_BATCH = 900  # bound parameters per IN (...) on SQLite

Method = Literal["exact", "ivf"]


@dataclass
class DocumentRef:
    doc_id: str
    source: str
    title: str


@dataclass
class DocumentGroup:
    normalized_hash: str
    documents: list[DocumentRef]


@dataclass
class ChunkPair:
    chunk_a: int
    chunk_b: int
    cosine: float
    doc_a: str
    doc_b: str
    same_doc: bool
    identical_text: bool


@dataclass
class DuplicateReport:
    document_groups: list[DocumentGroup]
    chunk_pairs: list[ChunkPair]
    threshold: float
    method: Method
    model_id: str
    vectors_searched: int
    skipped_vectors: int  # not finite: they cannot be compared (memory-pipeline health says which)
    truncated: bool  # more pairs than max_pairs were found; the strongest are kept
    generated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["generated_at"] = self.generated_at.isoformat()
        return data

    def render(self) -> str:
        lines = [
            f"{len(self.document_groups)} groups of documents with identical normalised text",
        ]
        for group in self.document_groups:
            lines.append(f"  {group.normalized_hash[:12]}:")
            lines.extend(f"    {d.doc_id}  {d.title}  ({d.source})" for d in group.documents)
        more = " (truncated to the strongest)" if self.truncated else ""
        lines += [
            "",
            f"{len(self.chunk_pairs)} chunk pairs with cosine ≥ {self.threshold}{more}; "
            f"{self.method} search over {self.vectors_searched} vectors of {self.model_id}",
        ]
        if self.chunk_pairs:
            rows = [
                [
                    f"{p.cosine:.4f}",
                    f"{p.doc_a}#{p.chunk_a}",
                    f"{p.doc_b}#{p.chunk_b}",
                    ("same doc " if p.same_doc else "") + ("identical" if p.identical_text else ""),
                ]
                for p in self.chunk_pairs
            ]
            lines.append(render_table(["cosine", "chunk a", "chunk b", "note"], rows))
        return "\n".join(lines)


def document_groups(store: Store) -> list[DocumentGroup]:
    """Documents sharing a normalised content hash, oldest first within a group."""
    rows = store.repeated_documents()
    return [
        DocumentGroup(h, [DocumentRef(r.doc_id, r.source, r.title) for r in members])
        for h, members in itertools.groupby(rows, key=lambda r: r.normalized_hash)
    ]


def _load_vectors(store: Store, model_id: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids, unit-normalised float32 matrix, count of malformed vectors skipped).

    Malformed = not finite, or not of the model's dimension; `health` names them.
    """
    dim = store.embedding_models().get(model_id, (0, 0))[0]
    ids: list[int] = []
    blobs: list[bytes] = []
    skipped = 0
    for rows in store.iter_vector_rows(model_id):
        for cid, row_dim, blob in rows:
            if row_dim == dim and len(blob) == 4 * dim:
                ids.append(int(cid))
                blobs.append(blob)
            else:
                skipped += 1
    mat = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
    finite = np.isfinite(mat).all(axis=1)
    mat = np.ascontiguousarray(mat[finite])
    if len(mat):
        faiss.normalize_L2(mat)  # cosine, also for a model that does not normalise
    return np.asarray(ids, dtype=np.int64)[finite], mat, skipped + int((~finite).sum())


def _build_index(mat: np.ndarray, exact_limit: int) -> tuple[faiss.Index, Method]:
    n, dim = mat.shape
    if n <= exact_limit:
        flat = faiss.IndexFlatIP(dim)
        flat.add(mat)
        return flat, "exact"
    # nlist ~ 4·sqrt(n) (FAISS guidance), but keep ≥ 39 training points per list.
    nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = mat[np.random.default_rng(0).choice(n, size=min(n, nlist * 64), replace=False)]
    ivf.train(sample)
    ivf.add(mat)
    ivf.nprobe = IVF_NPROBE
    return ivf, "ivf"


def _similar_pairs(
    ids: np.ndarray, mat: np.ndarray, threshold: float, exact_limit: int
) -> tuple[dict[tuple[int, int], float], Method]:
    """(lower id, higher id) -> cosine for every neighbour pair at or above the threshold."""
    if len(ids) < 2:
        return {}, "exact"
    index, method = _build_index(mat, exact_limit)
    k = min(NEIGHBOURS + 1, len(ids))  # +1: a vector is its own nearest neighbour
    pairs: dict[tuple[int, int], float] = {}
    saved = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    try:
        for start in range(0, len(ids), QUERY_BATCH):
            scores, rows = index.search(mat[start : start + QUERY_BATCH], k)
            query_rows = np.arange(start, start + len(rows))[:, None]
            hit = (rows >= 0) & (rows != query_rows) & (scores >= threshold)
            for qi, ri, score in zip(
                np.broadcast_to(query_rows, rows.shape)[hit], rows[hit], scores[hit], strict=True
            ):
                a, b = sorted((int(ids[qi]), int(ids[ri])))
                pairs[(a, b)] = max(pairs.get((a, b), -1.0), float(score))
    finally:
        faiss.cvar.distance_compute_blas_threshold = saved  # a process-wide global
    return pairs, method


def duplicate_audit(
    store: Store,
    model_id: str,
    *,
    threshold: float = 0.95,
    max_pairs: int = 1000,
    exact_limit: int = 50_000,
) -> DuplicateReport:
    """Groups of identical documents and near-identical chunk pairs; reads, never deletes.

    Pairs within one document are kept (marked ``same_doc``), and so are pairs of
    identical text (``identical_text``): both are what a curator wants to see.
    """
    if not 0.0 < threshold <= 1.0:
        raise InvalidInputError(f"threshold must be in (0, 1], got {threshold}")
    if max_pairs < 1:
        raise InvalidInputError(f"max_pairs must be ≥ 1, got {max_pairs}")
    groups = document_groups(store)
    ids, mat, skipped = _load_vectors(store, model_id)
    found, method = _similar_pairs(ids, mat, threshold, exact_limit)
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    kept = ranked[:max_pairs]
    meta = store.chunk_doc_and_sha(sorted({i for (a, b), _ in kept for i in (a, b)}))
    pairs = [
        ChunkPair(
            chunk_a=a,
            chunk_b=b,
            cosine=round(min(score, 1.0), 6),
            doc_a=meta[a][0],
            doc_b=meta[b][0],
            same_doc=meta[a][0] == meta[b][0],
            identical_text=meta[a][1] == meta[b][1],
        )
        for (a, b), score in kept
        if a in meta and b in meta  # a chunk deleted while we searched is no duplicate
    ]
    return DuplicateReport(
        document_groups=groups,
        chunk_pairs=pairs,
        threshold=threshold,
        method=method,
        model_id=model_id,
        vectors_searched=len(ids),
        skipped_vectors=skipped,
        truncated=len(ranked) > max_pairs,
    )
