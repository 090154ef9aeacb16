"""Run queries through ablation variants and score them: the library side of evaluation.

Document-level retrieval: each variant is asked for ``3 × max(k)`` chunks, which are
collapsed to documents in order, so a document's rank is that of its best chunk
(max-passage aggregation; Dai & Callan, "Deeper Text Understanding for IR with
Contextual Neural Language Modeling", SIGIR 2019).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.evaluation.beir import embed_queries
from memory_pipeline.evaluation.golden import GoldenSet, load_golden
from memory_pipeline.evaluation.metrics import (
    QueryMetrics,
    dedupe,
    hit_rate_at_k,
    mean_metrics,
    query_metrics,
)
from memory_pipeline.evaluation.results import EvalRun, QueryResult, VariantResult
from memory_pipeline.evaluation.variants import (
    ChunkDirectory,
    ChunkRef,
    Request,
    Variant,
    default_variant,
    resolve_variants,
)
from memory_pipeline.search.params import MAX_TOP_K
from memory_pipeline.store import now_utc
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters

DEFAULT_K_VALUES = (1, 3, 5, 10)
CHUNKS_PER_RESULT = 3  # chunks asked for per document-level result slot
_MAX_DEPTH = MAX_TOP_K
_KEPT_RANKS = 10  # ids kept per query in the JSON report: enough to read a failure, not 100s


@dataclass(frozen=True)
class EvalQuery:
    """One judged query, whatever its source (golden YAML or BEIR qrels).

    ``qrels`` judges the units the query is scored on: document ids, or
    ``"doc#index"`` chunk keys when ``chunk_level``. ``relevant_docs`` says which
    documents are on topic for the noise rate (default: ``qrels``).
    """

    id: str
    text: str
    qrels: dict[str, int]
    chunk_level: bool = False
    relevant_docs: dict[str, int] | None = None
    authority: str | None = None
    filters: SearchFilters | None = None
    # Judged by conversation turn ids (``qrels`` keys): a hit counts as the turns it holds.
    turn_level: bool = False
    group: str | None = None  # e.g. a question category, for per-group means
    # Each turn's session, for session-level figures (``session_recall@k``) beside the
    # turn-level ones; None: none given.
    session_of_turn: Mapping[str, str] | None = None
    # The search's reference date (``SearchRequest.now``); None: the clock's.
    now: dt.datetime | None = None


def golden_queries(golden: GoldenSet) -> list[EvalQuery]:
    out = []
    for q in golden.queries:
        docs = dict(q.relevant)
        for ref, grade in q.relevant_chunks.items():
            doc = ref.rpartition("#")[0]
            docs[doc] = max(docs.get(doc, 0), grade)
        out.append(
            EvalQuery(
                q.id, q.query, q.qrels(), q.chunk_level, docs, q.authority, q.search_filters()
            )
        )
    return out


def _score_query(
    q: EvalQuery, refs: Sequence[ChunkRef], k_values: Sequence[int], window: int
) -> tuple[QueryResult, QueryMetrics]:
    docs = [r.doc_id for r in refs]
    if q.turn_level:  # each returned turn takes a rank, a chunk of three takes three
        ranking = dedupe(t for r in refs for t in r.turns)
    else:
        ranking = dedupe([r.key for r in refs] if q.chunk_level else docs)
    m = query_metrics(
        ranking,
        docs,
        q.qrels,
        k_values,
        doc_qrels=q.relevant_docs,
        authority=q.authority,
        authority_window=window,
    )
    if q.turn_level and q.session_of_turn is not None:
        m.values.update(session_recall(ranking, q.qrels, q.session_of_turn, k_values))
    result = QueryResult(
        q.id, q.text, m.values, ranking[:_KEPT_RANKS], m.authority_rank, group=q.group
    )
    return result, m


def session_recall(
    turns: Sequence[str],
    qrels: Mapping[str, int],
    session_of_turn: Mapping[str, str],
    k_values: Sequence[int],
) -> dict[str, float | None]:
    """``session_recall@k``: 1 when a session holding evidence is among the first k
    distinct sessions of the ranking (its turns' sessions, each at its first turn)."""
    sessions = dedupe(session_of_turn.get(t, t) for t in turns)
    evidence = {session_of_turn.get(t, t): 1 for t, grade in qrels.items() if grade > 0}
    return {f"session_recall@{k}": hit_rate_at_k(sessions, evidence, k) for k in k_values}


def _run_variant(
    variant: Variant,
    system: MemorySystem,
    chunks: ChunkDirectory,
    queries: Sequence[EvalQuery],
    vectors: np.ndarray,
    depth: int,
    k_values: Sequence[int],
    window: int,
    excluded: Collection[int],
    progress: bool,
) -> VariantResult:
    started = time.perf_counter()
    per_query: list[QueryResult] = []
    scored: list[QueryMetrics] = []
    steps = list(zip(queries, vectors, strict=True))
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc=variant.name, unit="query", mininterval=2)
    for q, vec in steps:
        refs = variant.run(system, chunks, Request(q.text, vec, q.filters, depth, q.now))
        refs = [r for r in refs if r.chunk_id not in excluded]
        result, metrics = _score_query(q, refs, k_values, window)
        per_query.append(result)
        scored.append(metrics)
    summary = mean_metrics(scored, window)
    summary["queries_judged"] = float(sum(1 for r in per_query if r.metrics["mrr"] is not None))
    elapsed = time.perf_counter() - started
    groups: dict[str, list[QueryMetrics]] = {}
    for q, m in zip(queries, scored, strict=True):
        if q.group is not None:
            groups.setdefault(q.group, []).append(m)
    by_group = {g: mean_metrics(ms, window) for g, ms in sorted(groups.items())}
    return VariantResult(
        variant.name, variant.description, summary, per_query, elapsed, groups=by_group
    )


def evaluate(
    system: MemorySystem,
    queries: Sequence[EvalQuery],
    *,
    dataset: str,
    k_values: Sequence[int] = DEFAULT_K_VALUES,
    authority_window: int = 10,
    variants: Sequence[str] | None = None,
    query_vectors: np.ndarray | None = None,
    exclude_chunk_ids: Collection[int] = (),
    progress: bool = False,
) -> EvalRun:
    """Every query through every variant; metrics per query and their means."""
    k_values = sorted(set(k_values))
    if not k_values or k_values[0] < 1:
        raise InvalidInputError(f"k values must be positive integers, got {k_values}")
    if not queries:
        raise InvalidInputError(f"{dataset}: no judged queries to evaluate")
    depth = min(_MAX_DEPTH, CHUNKS_PER_RESULT * max(k_values) + len(exclude_chunk_ids))
    names = list(variants) if variants else [default_variant(system)]
    vectors = query_vectors
    if vectors is None:
        vectors = embed_queries(system.embedder, [q.text for q in queries])
    if len(vectors) != len(queries):
        raise InvalidInputError(f"{len(vectors)} query vectors for {len(queries)} queries")
    chunks = ChunkDirectory(system)
    excluded = set(exclude_chunk_ids)
    results: list[VariantResult] = []
    notes: list[str] = []
    pending = system.waiting_for_index()
    if pending:
        notes.append(
            f"{pending} chunks are not in the published index yet: only the hybrid variants "
            "see them (run update-index first for a fair comparison)"
        )
    for variant in resolve_variants(names):
        if variant.needs_reranker and system.reranker is None:
            notes.append(f"{variant.name} skipped: {system.reranker_status}")
            continue
        results.append(
            _run_variant(
                variant, system, chunks, queries, vectors, depth, k_values, authority_window,
                excluded, progress,
            )
        )  # fmt: skip
    if not results:
        raise InvalidInputError(f"no variant could run: {'; '.join(notes)}")
    counts = system.counts()
    primary = default_variant(system)
    st = system.settings
    return EvalRun(
        dataset=dataset,
        model_id=system.model_id,
        k_values=list(k_values),
        authority_window=authority_window,
        created_at=now_utc().isoformat(timespec="seconds"),
        n_queries=len(queries),
        n_documents=counts["documents"],
        n_chunks=counts["chunks"],
        primary=primary if any(r.name == primary for r in results) else results[0].name,
        variants=results,
        notes=notes,
        settings={
            "top_n_configured": st.search.top_n,
            "top_n_used": max(st.search.top_n, depth),  # each retriever reaches the scored depth
            "fusion": st.search.fusion,
            "rrf_k": st.search.rrf_k,
            "max_chunk_size": st.ingest.max_chunk_size,
            "chunk_overlap": st.ingest.chunk_overlap,
            "chunks_requested": depth,
            "reranker": system.reranker_status,
            "default_variant": primary,
        },
    )


def evaluate_golden(
    system: MemorySystem,
    golden_path: Path | GoldenSet,
    k_values: Sequence[int] = DEFAULT_K_VALUES,
    *,
    variants: Sequence[str] | None = None,
    authority_window: int = 10,
    exclude_chunk_ids: Collection[int] = (),
) -> EvalRun:
    """The golden set against this memory, in its default configuration unless told."""
    golden = golden_path if isinstance(golden_path, GoldenSet) else load_golden(golden_path)
    return evaluate(
        system,
        golden_queries(golden),
        dataset=golden.name,
        k_values=k_values,
        authority_window=authority_window,
        variants=variants,
        exclude_chunk_ids=exclude_chunk_ids,
    )


def evaluate_without(
    system: MemorySystem,
    golden: Path | GoldenSet,
    exclude_chunk_ids: Collection[int],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> EvalRun:
    """The golden set as if these chunks (forgetting candidates) were gone.

    The chunks are dropped from each result list, which is what forgetting them does
    to the ranking apart from small shifts in BM25 statistics.
    """
    return evaluate_golden(system, golden, k_values, exclude_chunk_ids=exclude_chunk_ids)


@dataclass(frozen=True)
class ForgettingCost:
    """Golden-set metrics with and without the forgetting candidates (primary variant)."""

    with_candidates: EvalRun
    without_candidates: EvalRun
    excluded_chunks: int

    def deltas(self) -> dict[str, float]:
        before = self.with_candidates.variant().summary
        after = self.without_candidates.variant().summary
        return {k: after[k] - before[k] for k in before if k in after}

    def summary_lines(self, metrics: Sequence[str] = ("ndcg@10", "recall@10", "mrr")) -> list[str]:
        before = self.with_candidates.variant().summary
        after = self.without_candidates.variant().summary
        return [
            f"{m}: {before[m]:.4f} with the {self.excluded_chunks} candidates, "
            f"{after[m]:.4f} without ({after[m] - before[m]:+.4f})"
            for m in metrics
            if m in before and m in after
        ]


def forgetting_cost(
    system: MemorySystem,
    golden: Path | GoldenSet,
    exclude_chunk_ids: Collection[int],
    k_values: Sequence[int] = DEFAULT_K_VALUES,
) -> ForgettingCost:
    """What archiving these chunks would cost on the golden set, for the forgetting report."""
    golden_set = golden if isinstance(golden, GoldenSet) else load_golden(golden)
    before = evaluate_golden(system, golden_set, k_values)
    after = evaluate_without(system, golden_set, exclude_chunk_ids, k_values)
    return ForgettingCost(before, after, len(set(exclude_chunk_ids)))
