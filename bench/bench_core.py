"""Core engine benchmark: index updates, hybrid query latency, cold open, ingest overhead.

Run by hand (``make bench``); prints every figure beside its baseline. Synthetic
chunks with deterministic random vectors isolate index and fusion costs from
model forward passes; the last section uses the real default model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_pipeline.config import Settings
from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.store import now_utc
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import DocumentInfo, NewChunk

DIM = 384
CHUNKS_PER_DOC = 100


class RandomEmbedder:
    """Deterministic unit vectors from a hash of the text: free to compute."""

    model_id = "bench-random-384"
    dim = DIM
    max_tokens = 512

    def _vec(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(text)) % (2**32))
        v = rng.standard_normal(DIM).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts, *, progress=False):  # type: ignore[no-untyped-def]
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def synthetic_texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(30_000)]
    ranks = np.arange(1, len(vocab) + 1)
    p = (1 / ranks) / (1 / ranks).sum()  # Zipf-like, as in real text
    words = rng.choice(len(vocab), size=(n, 60), p=p)
    return [" ".join(vocab[j] for j in row) for row in words]


def fill(system: MemorySystem, n: int, seed: int, prefix: str) -> None:
    texts = synthetic_texts(n, seed)
    rng = np.random.default_rng(seed + 1)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for start in range(0, n, CHUNKS_PER_DOC):
        part = texts[start : start + CHUNKS_PER_DOC]
        doc = DocumentInfo(
            doc_id=f"{prefix}{start:08d}",
            source=f"bench://{prefix}{start}",
            title="bench",
            fmt="text",
            content_hash="x",
            normalized_hash="x",
            byte_size=1,
            knowledge_type="paper",
            importance=None,
            source_date=None,
            source_date_rule=None,
            created_at=now_utc(),
        )
        chunks = [NewChunk(i, t, 60) for i, t in enumerate(part)]
        system.store.add_document(
            doc, chunks, vecs[start : start + len(part)], RandomEmbedder.model_id
        )


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_scale(n: int, workdir: Path, queries: int) -> dict[str, float]:
    root = workdir / f"n{n}"
    root.mkdir()
    system = MemorySystem(
        Settings(db_path=root / "m.db", index_path=root / "idx", model_cache=root),
        embedder=RandomEmbedder(),
    )
    fill(system, n, seed=n, prefix="base")
    out: dict[str, float] = {"chunks": n}
    out["rebuild_s"] = timed(system.rebuild_index)
    updates = []
    for r in range(3):
        fill(system, 100, seed=10_000 + r, prefix=f"add{r}-")
        updates.append(timed(system.update_index))
    out["update_100_s"] = statistics.median(updates)
    out["rebuild_after_s"] = timed(system.rebuild_index)

    texts = system.store.contents(
        system.store.all_ids()[:: max(1, n // queries)][:queries].tolist()
    )
    qs = [" ".join(t.split()[:8]) for t in texts.values()]
    qvecs = [system.embedder.embed_query(q) for q in qs]
    params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
    rrf = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False, fusion="rrf")
    system.searcher.search(qs[0], None, params, query_vector=qvecs[0])  # warm
    lat: list[float] = []
    lat_rrf: list[float] = []
    stage: dict[str, list[float]] = {}
    for i, (q, v) in enumerate(zip(qs, qvecs, strict=True)):
        # The default (convex, every candidate scored by both sides) and RRF, in
        # alternating order so machine noise falls on both alike.
        for which in ("default", "rrf") if i % 2 else ("rrf", "default"):
            start = time.perf_counter()
            res = system.searcher.search(
                q, None, params if which == "default" else rrf, query_vector=v
            )
            (lat if which == "default" else lat_rrf).append((time.perf_counter() - start) * 1000)
            if which == "default":
                for k, ms in res.stats.timings_ms.items():
                    stage.setdefault(k, []).append(ms)
    out["query_p50_ms"] = statistics.median(lat)
    out["query_p95_ms"] = float(np.percentile(lat, 95))
    out["query_rrf_p50_ms"] = statistics.median(lat_rrf)
    for k, vals in stage.items():
        out[f"stage_{k}_p50_ms"] = statistics.median(vals)
    out["index_dir"] = str(root / "idx")  # type: ignore[assignment]
    out["_queries"] = qs  # type: ignore[assignment]
    system.close()
    return out


def bench_rank_bm25(n: int, queries: list[str]) -> tuple[float, float]:
    from rank_bm25 import BM25Okapi

    corpus = [tokenize(t) for t in synthetic_texts(n, seed=n)]
    start = time.perf_counter()
    bm25 = BM25Okapi(corpus)
    build = time.perf_counter() - start
    lat = []
    for q in queries:
        start = time.perf_counter()
        scores = bm25.get_scores(tokenize(q))
        np.argpartition(-scores, 50)[:50]
        lat.append((time.perf_counter() - start) * 1000)
    return build, statistics.median(lat)


COLD_OPEN = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from memory_pipeline.index.backends.local.reader import IndexReader
t1 = time.perf_counter()
version = IndexReader(Path(sys.argv[1])).current()
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {version.manifest.n_dense}")
"""


def bench_cold_open(index_dir: str) -> tuple[float, float, int]:
    out = subprocess.run(
        [sys.executable, "-c", COLD_OPEN, index_dir], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def bench_real_ingest(workdir: Path, docs: int) -> dict[str, float]:
    """Ingest with the real default model; how much time is spent outside forward passes."""
    from memory_pipeline.embedding.st import SentenceTransformerEmbedder

    root = workdir / "real"
    root.mkdir()
    settings = Settings(db_path=root / "m.db", index_path=root / "idx").replace(
        model_cache=Path(os.environ.get("HYBRID_RAG_MODEL_CACHE", Settings().embedding.model_cache))
    )
    embedder = SentenceTransformerEmbedder(
        settings.embedding.model, cache_dir=settings.embedding.model_cache
    )
    _ = embedder.model  # load (and unpack once) outside the measured ingest
    forward = 0.0
    original = embedder.embed_documents

    def measured(texts, **kw):  # type: ignore[no-untyped-def]
        nonlocal forward
        start = time.perf_counter()
        out = original(texts, **kw)
        forward += time.perf_counter() - start
        return out

    embedder.embed_documents = measured  # type: ignore[method-assign]
    system = MemorySystem(settings, embedder=embedder)
    files = []
    words = synthetic_texts(docs * 8, seed=7)
    for d in range(docs):
        body = "\n\n".join(f"## Part {p}\n\n" + words[d * 8 + p] for p in range(8))
        path = root / f"doc{d}.md"
        path.write_text(f"# Document {d}\n\n{body}", encoding="utf-8")
        files.append(path)
    total = timed(lambda: system.ingest(files, update_index=True))
    chunks = system.store.counts()["chunks"]
    system.close()
    return {
        "docs": docs,
        "chunks": chunks,
        "total_s": total,
        "forward_s": forward,
        "outside_share": (total - forward) / total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--bm25-queries", type=int, default=20)
    parser.add_argument("--real-docs", type=int, default=12, help="0 skips the real-model section")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, object] = {"date": dt.date.today().isoformat()}
    with tempfile.TemporaryDirectory(prefix="mp-bench-") as tmp:
        work = Path(tmp)
        scales = {n: bench_scale(n, work, args.queries) for n in sizes}
        small, big = scales[min(sizes)], scales[max(sizes)]
        print("\n== update_index: 100 new chunks (median of 3) vs rebuilding everything ==")
        print(f"{'chunks':>8} {'update 100':>12} {'rebuild all':>12}")
        for n, r in scales.items():
            print(f"{n:>8} {r['update_100_s'] * 1000:>10.1f}ms {r['rebuild_after_s']:>11.2f}s")
        ratio = big["update_100_s"] / small["update_100_s"]
        print(f"update cost ratio {max(sizes)}/{min(sizes)}: {ratio:.2f}x  (target ≤ 2x)")

        print(
            "\n== hybrid query, top-10 of top-50 per side, no query embedding, no cross-encoder =="
        )
        for n, r in scales.items():
            stages = ", ".join(
                f"{k[6:-7]} {v:.2f}" for k, v in r.items() if k.startswith("stage_") and v >= 0.05
            )
            print(
                f"{n:>8} chunks: p50 {r['query_p50_ms']:.2f} ms, p95 {r['query_p95_ms']:.2f} ms  [{stages}]"
                f"  (RRF fusion instead: p50 {r['query_rrf_p50_ms']:.2f} ms)"
            )
        build, bm25_p50 = bench_rank_bm25(max(sizes), big["_queries"][: args.bm25_queries])  # type: ignore[index]
        print(
            f"rank_bm25 BM25Okapi at {max(sizes)}: p50 {bm25_p50:.1f} ms per query "
            f"(sparse side only; build {build:.1f}s)   target: hybrid p50 ≤ 20 ms"
        )

        imports, open_s, n_dense = bench_cold_open(str(big["index_dir"]))
        print(f"\n== open the published {n_dense}-vector index in a fresh process ==")
        print(f"open {open_s:.2f}s (+ imports {imports:.2f}s)   target ≤ 2 s")
        results["scales"] = {
            n: {k: v for k, v in r.items() if not k.startswith("_") and k != "index_dir"}
            for n, r in scales.items()
        }
        results.update(
            update_ratio=ratio,
            rank_bm25_p50_ms=bm25_p50,
            cold_open_s=open_s,
            cold_imports_s=imports,
        )
        if args.real_docs:
            real = bench_real_ingest(work, args.real_docs)
            print("\n== ingest with the real default model (multilingual-e5-small) ==")
            print(
                f"{real['docs']} docs, {real['chunks']} chunks: total {real['total_s']:.1f}s, "
                f"forward passes {real['forward_s']:.1f}s, outside {real['outside_share']:.1%}"
                "   target ≤ 15%"
            )
            results["real_ingest"] = real
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
