"""The local backend's dense index types at 100k chunks of real embedding vectors.

Run by hand (``python bench/bench_dense.py``; needs the SciFact evaluation memory, which
``memory-pipeline eval --beir ../shared/datasets/scifact`` builds once). The chunks and
their multilingual-e5-small vectors come from the evaluation memories in the model
cache; they are repeated, with a little noise on the vectors, up to ``--chunks``. The
queries are SciFact's test queries embedded by the same model. Printed side by side,
in one run: ``flat`` (exact) and ``hnsw`` — hybrid p50 / p95 (no query embedding, no
cross-encoder), recall@10 of the dense search against exact, ``update_index`` of 100
new chunks, and whether a filtered search keeping 1% of the chunks returns the exact
filtered top-10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from memory_pipeline.config import Settings
from memory_pipeline.evaluation.beir import default_eval_cache
from memory_pipeline.index.backends.local.dense import search_segments
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.store import Store, now_utc
from memory_pipeline.store.engine import sqlite_url
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import DocumentInfo, NewChunk, SearchFilters

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
CHUNKS_PER_DOC = 50


class Fixed:
    """An embedder whose document vectors were computed already (it is never asked)."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id, self.dim, self.max_tokens = model_id, dim, 512

    def embed_documents(self, texts, *, progress=False):  # type: ignore[no-untyped-def]
        raise AssertionError("the benchmark stores vectors directly")

    def embed_query(self, text: str) -> np.ndarray:
        raise AssertionError("queries come embedded")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def real_chunks() -> tuple[str, list[str], np.ndarray]:
    """(model id, texts, vectors) of every complete evaluation memory in the cache."""
    texts: list[str] = []
    blobs: list[bytes] = []
    model_id = ""
    for db in sorted(default_eval_cache().glob("*/memory.db")):
        if not (db.parent / "complete.json").exists():
            continue
        info = json.loads((db.parent / "complete.json").read_text())
        model_id = info["model_id"]
        store = Store(sqlite_url(db))
        for text, blob in store.iter_content_vectors(model_id):
            texts.append(text)
            blobs.append(blob)
        store.close()
    if not texts:
        raise SystemExit(
            "no evaluation memory in the cache: run "
            "`memory-pipeline eval --beir ../shared/datasets/scifact` once first"
        )
    vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    return model_id, texts, vectors


class GrownTexts(Sequence[str]):
    """``n`` texts: the real ones, then copies of them with a marker token (``copy<k>``),
    made on demand instead of held (a million chunks' texts would take a GB)."""

    def __init__(self, texts: list[str], n: int):
        self.texts, self.n = texts, n

    def __len__(self) -> int:
        return self.n

    def _one(self, i: int) -> str:
        copy, j = divmod(i, len(self.texts))
        return self.texts[j] if copy == 0 else f"{self.texts[j]} copy{copy}"

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._one(k) for k in range(*i.indices(self.n))]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self._one(i % self.n)


def grown(texts: list[str], vectors: np.ndarray, n: int) -> tuple[GrownTexts, np.ndarray]:
    """``n`` chunks: the real ones, then copies with noise (and a marker token). The
    vectors are written into one array (no second copy of them at any time)."""
    rng = np.random.default_rng(0)
    out = np.empty((n, vectors.shape[1]), dtype=np.float32)
    done = min(n, len(vectors))
    out[:done] = vectors[:done]
    while done < n:
        take = min(len(vectors), n - done)
        part = out[done : done + take]
        part[:] = rng.normal(0, 0.02, (take, vectors.shape[1])).astype(np.float32)
        part += vectors[:take]
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        done += take
    return GrownTexts(texts, n), out


def fill(
    system: MemorySystem,
    texts: Sequence[str],
    vectors: np.ndarray,
    prefix: str,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Store ``texts`` with their ``vectors``, ``CHUNKS_PER_DOC`` chunks a document;
    ``progress`` is told the chunks stored so far after each document."""
    for start in range(0, len(texts), CHUNKS_PER_DOC):
        part = texts[start : start + CHUNKS_PER_DOC]
        doc = DocumentInfo(
            f"{prefix}{start:08d}", f"bench://{prefix}{start}", "bench", "text", "x", "x", 1,
            "paper", None, None, None, now_utc(),
        )  # fmt: skip
        chunks = [NewChunk(i, t, len(t.split())) for i, t in enumerate(part)]
        system.store.add_document(doc, chunks, vectors[start : start + len(part)], system.model_id)
        if progress is not None:
            progress(start + len(part))


def queries(model_id: str, n: int) -> tuple[list[str], np.ndarray]:
    from memory_pipeline.embedding.registry import embedder_for

    rows = [json.loads(line) for line in SCIFACT.joinpath("queries.jsonl").open()][:n]
    texts = [r["text"] for r in rows]
    embedder = embedder_for(Settings().embedding)
    if embedder.model_id != model_id:
        raise SystemExit(
            f"the cached vectors are {model_id!r}, the default model {embedder.model_id!r}"
        )
    from memory_pipeline.evaluation.beir import embed_queries

    return texts, embed_queries(embedder, texts)


def measure(systems: dict[str, MemorySystem], qs: list[str], qv: np.ndarray) -> dict[str, dict]:
    """Hybrid p50 / p95 of each memory; the queries alternate between them, so machine
    noise falls on all alike."""
    params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
    lat: dict[str, list[float]] = {k: [] for k in systems}
    for system in systems.values():
        system.searcher.search(qs[0], None, params, query_vector=qv[0])  # warm
    for i, (q, v) in enumerate(zip(qs, qv, strict=True)):
        order = list(systems) if i % 2 else list(reversed(systems))
        for kind in order:
            start = time.perf_counter()
            systems[kind].searcher.search(q, None, params, query_vector=v)
            lat[kind].append((time.perf_counter() - start) * 1000)
    return {
        k: {"p50_ms": statistics.median(x), "p95_ms": float(np.percentile(x, 95))}
        for k, x in lat.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    model_id, real, vectors = real_chunks()
    texts, vectors = grown(real, vectors, args.chunks)
    qs, qv = queries(model_id, args.queries)
    print(f"{len(texts)} chunks ({model_id}), {len(qs)} SciFact queries")
    results: dict[str, dict[str, float]] = {}
    systems: dict[str, MemorySystem] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("flat", "hnsw"):
            root = Path(tmp) / kind
            settings = Settings(
                db_path=root / "m.db", index_path=root / "idx", ivf_threshold=50_000,
                dense_index=kind,
            )  # fmt: skip
            root.mkdir()
            system = MemorySystem(settings, embedder=Fixed(model_id, vectors.shape[1]))
            fill(system, texts, vectors, "doc")
            started = time.perf_counter()
            system.rebuild_index()
            results[kind] = {"build_s": time.perf_counter() - started}
            systems[kind] = system
        for kind, figures in measure(systems, qs, qv).items():
            results[kind].update(figures)
        exact = systems["flat"].published()
        approx = systems["hnsw"].published()
        assert exact is not None and approx is not None
        recall = []
        for v in qv:
            want = {i for i, _ in search_segments(exact.segments, v, 10, deleted=exact.deleted)}
            got = {i for i, _ in search_segments(approx.segments, v, 10, deleted=approx.deleted)}
            recall.append(len(want & got) / 10)
        results["hnsw"]["recall@10"] = float(np.mean(recall))
        results["flat"]["recall@10"] = 1.0
        # A filter keeping 1% of the chunks (every 100th document's chunks).
        keep = [f"doc{s:08d}" for s in range(0, len(texts), CHUNKS_PER_DOC * 100)]
        filters = SearchFilters(doc_ids=keep)
        params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
        same = 0
        for q, v in zip(qs, qv, strict=True):
            a = systems["flat"].searcher.search(q, filters, params, query_vector=v).hits
            b = systems["hnsw"].searcher.search(q, filters, params, query_vector=v).hits
            same += [h.chunk_id for h in a] == [h.chunk_id for h in b]
        results["hnsw"]["filtered_same_top10"] = same / len(qs)
        results["flat"]["filtered_same_top10"] = 1.0
        for kind, system in systems.items():
            fill(system, texts[:100], vectors[:100], f"add-{kind}-")
            started = time.perf_counter()
            system.update_index()
            results[kind]["update_100_s"] = time.perf_counter() - started
            system.close()
    print(
        f"{'index':6} {'build':>8} {'p50':>9} {'p95':>9} {'recall@10':>10} {'update 100':>11} filtered=exact"
    )
    for kind, r in results.items():
        print(
            f"{kind:6} {r['build_s']:7.1f}s {r['p50_ms']:7.2f}ms {r['p95_ms']:7.2f}ms "
            f"{r['recall@10']:10.3f} {r['update_100_s'] * 1000:9.1f}ms {r['filtered_same_top10']:.0%}"
        )
    print("targets: hnsw p50 <= 5 ms at 100k with recall@10 >= 0.95; filtered top-10 = exact")


if __name__ == "__main__":
    main()
