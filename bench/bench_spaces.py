"""Memory spaces: what a search pays when other spaces share the memory, and what a
second space pays to ingest files another space already holds.

Run by hand (``make bench``). Part 1 uses synthetic chunks with random vectors (index
and filter costs only); each figure is printed beside its baseline, a memory holding
the searched space alone, measured in the same run with the queries alternating. Part 2
ingests the first 100 SciFact abstracts (read from ../shared/datasets, never copied)
with the real default model into one space, then into another.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_core import RandomEmbedder, fill

from memory_pipeline.config import Settings
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def _memory(root: Path, space: str = "default") -> MemorySystem:
    root.mkdir(parents=True, exist_ok=True)
    return MemorySystem(
        Settings(db_path=root / "m.db", index_path=root / "idx", model_cache=root),
        embedder=RandomEmbedder(),
    ).bound(Spaces.bound(space))


def bench_search(workdir: Path, mine: int, others: int, queries: int) -> dict[str, float]:
    """p50 of a search bound to a space of ``mine`` chunks, with ``others`` chunks in
    another space of the same memory, against a memory holding the ``mine`` alone."""
    shared = _memory(workdir / f"shared-{mine}-{others}", "project-a")
    fill(shared, mine, seed=mine, prefix="a")
    fill(shared.bound(Spaces.bound("project-b")), others, seed=others + 1, prefix="b")
    shared.update_index()
    alone = _memory(workdir / f"alone-{mine}", "project-a")
    fill(alone, mine, seed=mine, prefix="a")
    alone.update_index()
    ids = alone.store.all_ids()[:: max(1, mine // queries)][:queries]
    texts = alone.store.contents(ids.tolist())
    qs = [" ".join(t.split()[:8]) for t in texts.values()]
    vecs = [alone.embedder.embed_query(q) for q in qs]
    params = SearchRequest(top_k=10, top_n=50, record_access=False, use_reranker=False)
    lat: dict[str, list[float]] = {"shared": [], "alone": []}
    same = 0
    for i, (q, v) in enumerate(zip(qs, vecs, strict=True)):
        got: dict[str, list[str]] = {}
        for which in ("shared", "alone") if i % 2 else ("alone", "shared"):
            system = shared if which == "shared" else alone
            start = time.perf_counter()
            res = system.searcher.search(q, None, params, query_vector=v)
            lat[which].append((time.perf_counter() - start) * 1000)
            got[which] = [h.content for h in res.hits]
        same += got["shared"] == got["alone"]
    shared.close()
    alone.close()
    return {
        "mine": mine,
        "others": others,
        "p50_shared_ms": statistics.median(lat["shared"]),
        "p50_alone_ms": statistics.median(lat["alone"]),
        "same_top10": same / len(qs),
    }


def bench_second_space(workdir: Path, n_files: int) -> dict[str, float]:
    """The same files into space A, then space B, with the real default model."""
    from memory_pipeline.embedding.st import SentenceTransformerEmbedder

    with SCIFACT.joinpath("corpus.jsonl").open(encoding="utf-8") as fh:
        docs = [json.loads(line) for line in itertools.islice(fh, n_files)]
    folder = workdir / "files"
    folder.mkdir()
    files = []
    for d in docs:
        path = folder / f"{d['_id']}.md"
        path.write_text(f"# {d['title']}\n\n{d['text']}", encoding="utf-8")
        files.append(path)
    settings = Settings(db_path=workdir / "real.db", index_path=workdir / "real-idx")
    embedder = SentenceTransformerEmbedder(
        settings.embedding.model, cache_dir=settings.embedding.model_cache
    )
    _ = embedder.model  # loaded outside the measured ingests
    out: dict[str, float] = {"files": len(files)}
    for space in ("project-a", "project-b"):
        system = MemorySystem(settings, embedder=embedder).bound(Spaces.bound(space))
        start = time.perf_counter()
        results = system.ingest(files, update_index=True)
        out[f"{space}_s"] = time.perf_counter() - start
        out[f"{space}_chunks"] = sum(r.chunks for r in results)
        out[f"{space}_embedded"] = sum(r.embedded for r in results)
        out[f"{space}_reused"] = sum(r.reused_vectors for r in results)
        system.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--files", type=int, default=100, help="0 skips the real-model part")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("== search bound to one space, other spaces in the same memory ==")
        print(
            f"{'mine':>8} {'others':>8} {'p50 shared':>11} {'p50 alone':>10} {'ratio':>6} same top-10"
        )
        rows = []
        for mine, others in ((50_000, 50_000), (1_000, 99_000), (10_000, 90_000)):
            r = bench_search(work, mine, others, args.queries)
            rows.append(r)
            print(
                f"{mine:>8} {others:>8} {r['p50_shared_ms']:>9.2f}ms {r['p50_alone_ms']:>8.2f}ms "
                f"{r['p50_shared_ms'] / r['p50_alone_ms']:>5.2f}x {r['same_top10']:.0%}"
            )
        figures["search"] = rows
        if args.files and not SCIFACT.joinpath("corpus.jsonl").exists():
            print(
                f"\n(second-space ingest skipped: {SCIFACT} not found; it sits beside the checkout)"
            )
        elif args.files:
            print(f"\n== the same {args.files} files into a second space (real model) ==")
            r = bench_second_space(work, args.files)
            figures["second_space"] = r
            for space in ("project-a", "project-b"):
                print(
                    f"{space}: {r[f'{space}_s']:.1f}s, {r[f'{space}_chunks']:.0f} chunks, "
                    f"{r[f'{space}_embedded']:.0f} embedded, {r[f'{space}_reused']:.0f} reused"
                )
            print(f"second space / first: {r['project-b_s'] / r['project-a_s']:.2f}x the time")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=float))


if __name__ == "__main__":
    main()
