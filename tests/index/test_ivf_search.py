"""Search through an IVF segment gives what an exact (flat) index gives.

Two real memories hold the same chunks under the same ids: one with a low
``ivf_threshold``, so the index writer gives its big segment an IVF index, and one
with only flat segments. With at most 256 vectors ``_build_ivf`` makes 64 lists and
searches probe 64, so the IVF search is exhaustive and must agree with the flat one
id for id. An IVF segment keeps no id → vector map: convex fusion completes the
scores of its chunks from the vectors in the store instead, and must still agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import faiss
import numpy as np
import pytest

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.index.backends.local.dense import scores_for_ids, search_segments
from memory_pipeline.index.backends.local.reader import LoadedVersion
from memory_pipeline.ingest.loaders import load_text
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchHit
from tests.conftest import make_settings

N_DOCS = 200  # one segment of 200 vectors: enough to train 64 lists, few enough to be quick
N_LATER = 10  # a second, small segment: flat in both memories
TOP_N = 10  # small, so the dense and BM25 top-N differ and fusion has scores to complete


def corpus(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, 5)) for _ in range(150)]
    return [" ".join(rng.choice(vocab, size=int(rng.integers(5, 9)))) for _ in range(n)]


class JitteredHashing(HashingEmbedder):
    """The hashing embedder plus a small fixed perturbation per text.

    Bag-of-words vectors give many exactly equal inner products; which of a tie
    group makes a top-N cut is then up to FAISS, and differs between an IVF and a
    flat index. A per-text perturbation (seeded by the text) makes scores distinct.
    """

    def __init__(self) -> None:
        super().__init__()
        self.model_id = f"hashing-jitter-{self.dim}"

    def _vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        noise = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        vec = super()._vector(text) + 0.05 * noise
        return (vec / np.linalg.norm(vec)).astype(np.float32)


TEXTS = corpus(N_DOCS + N_LATER, seed=3)
QUERIES = [" ".join(t.split()[:2]) for t in TEXTS[::23]] + [
    " ".join([TEXTS[5].split()[0], TEXTS[150].split()[-1], TEXTS[77].split()[1]])
]


def build(base: Path, ivf_threshold: int, fusion: str) -> MemorySystem:
    memory = MemorySystem(
        make_settings(base, ivf_threshold=ivf_threshold, top_n=TOP_N, fusion=fusion),
        embedder=JitteredHashing(),
    )
    first = [load_text(t, f"doc{i}") for i, t in enumerate(TEXTS[:N_DOCS])]
    results = memory.ingest_loaded(first)  # one index build: one segment of N_DOCS vectors
    later = [load_text(t, f"doc{N_DOCS + i}") for i, t in enumerate(TEXTS[N_DOCS:])]
    memory.ingest_loaded(later)
    memory.delete_document(results[7].doc_id, update_index=True)  # a deleted id in the IVF segment
    return memory


@pytest.fixture(scope="module", params=["convex", "rrf"])
def memories(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MemorySystem, MemorySystem]]:
    """The two memories, built once per fusion; the tests only read them."""
    base = tmp_path_factory.mktemp(f"ivf-{request.param}")
    ivf = build(base / "ivf", ivf_threshold=64, fusion=request.param)
    flat = build(base / "flat", ivf_threshold=10_000, fusion=request.param)
    yield ivf, flat
    ivf.close()
    flat.close()


def served(memory: MemorySystem) -> LoadedVersion:
    version = memory.reader.current()
    assert version is not None
    return version


def key(hits: list[SearchHit]) -> list[tuple[int, str]]:
    return [(h.chunk_id, h.content) for h in hits]


def test_the_big_segment_is_ivf_only_in_the_low_threshold_memory(
    memories: tuple[MemorySystem, MemorySystem],
) -> None:
    ivf, flat = memories
    assert [p.name for p in served(ivf).path.rglob("*.ivf.faiss")] == ["seg000001.ivf.faiss"]
    assert list(flat.settings.index_path.rglob("*.ivf.faiss")) == []
    kinds = [(len(s.ids), isinstance(s.index, faiss.IndexIVF)) for s in served(ivf).segments]
    assert kinds == [(N_DOCS, True), (N_LATER, False)]
    assert not any(isinstance(s.index, faiss.IndexIVF) for s in served(flat).segments)
    assert served(ivf).manifest.n_dense == served(flat).manifest.n_dense == N_DOCS + N_LATER - 1


@pytest.mark.parametrize("query", QUERIES)
def test_dense_top_n_through_ivf_equals_flat(
    memories: tuple[MemorySystem, MemorySystem], query: str
) -> None:
    ivf, flat = memories
    qvec = ivf.embed(query)
    a, b = served(ivf), served(flat)
    got = search_segments(a.segments, qvec, 30, deleted=a.deleted)
    want = search_segments(b.segments, qvec, 30, deleted=b.deleted)
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
    assert not set(a.deleted.tolist()) & {i for i, _ in got}
    # With a filter: FAISS's selector on the IVF segment keeps exactly the allowed ids.
    allowed = np.arange(1, N_DOCS + N_LATER + 1, 3, dtype=np.int64)
    got = search_segments(a.segments, qvec, 10, deleted=a.deleted, allowed=allowed)
    want = search_segments(b.segments, qvec, 10, deleted=b.deleted, allowed=allowed)
    assert [i for i, _ in got] == [i for i, _ in want] and len(got) == 10


@pytest.mark.parametrize("query", QUERIES)
def test_search_hits_through_ivf_equal_flat(
    memories: tuple[MemorySystem, MemorySystem], query: str
) -> None:
    ivf, flat = memories
    got = ivf.query(query, ivf.settings.search_request(top_k=8, record_access=False))
    want = flat.query(query, flat.settings.search_request(top_k=8, record_access=False))
    assert key(got.hits) == key(want.hits)
    assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits], abs=1e-5)
    for g, w in zip(got.hits, want.hits, strict=True):
        assert (g.stage_scores["dense"] is None) == (w.stage_scores["dense"] is None)
        if w.stage_scores["dense"] is not None:
            assert g.stage_scores["dense"] == pytest.approx(w.stage_scores["dense"], abs=1e-5)
        assert g.stage_scores["sparse"] == pytest.approx(w.stage_scores["sparse"])
    assert got.stats.unindexed_searched == 0


@pytest.mark.parametrize("memories", ["convex"], indirect=True)
def test_fusion_completion_scores_ivf_chunks_from_the_store(
    memories: tuple[MemorySystem, MemorySystem],
) -> None:
    """Convex fusion: a BM25-only candidate in the IVF segment gets its exact dense score."""
    ivf, flat = memories
    version = served(ivf)
    [big] = [s for s in version.segments if isinstance(s.index, faiss.IndexIVF)]
    completed = 0
    for query in QUERIES:
        got = ivf.query(query, ivf.settings.search_request(top_k=TOP_N, record_access=False))
        want = flat.query(query, flat.settings.search_request(top_k=TOP_N, record_access=False))
        assert key(got.hits) == key(want.hits)
        assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits])
        held = big.holds(np.array([h.chunk_id for h in got.hits], dtype=np.int64))
        ids = [
            h.chunk_id
            for h, in_ivf in zip(got.hits, held, strict=True)
            if in_ivf and h.stage_scores["dense_rank"] is None  # not in the dense top-N
        ]
        if not ids:
            continue
        qvec = ivf.embed(query)
        # The segments cannot score these: an IVF segment keeps no vectors by id.
        found, missing = scores_for_ids(
            version.segments, qvec, np.array(ids, np.int64), deleted=version.deleted
        )
        assert found == [] and missing.tolist() == sorted(ids)
        stored, vectors = ivf.store.vectors_for(ids, ivf.embedder.model_id)
        exact = dict(zip(stored.tolist(), (vectors @ qvec).tolist(), strict=True))
        dense = {h.chunk_id: h.stage_scores["dense"] for h in got.hits}
        assert {i: dense[i] for i in ids} == pytest.approx(exact, abs=1e-6)
        completed += len(ids)
    assert completed > 0, "no query had a BM25-only candidate from the IVF segment"
