"""Search through an HNSW segment gives what an exact (flat) index gives.

The same two-memory setup as ``tests/index/test_ivf_search.py``: one memory whose big segment gets an
HNSW graph (``dense_index=hnsw``, a low threshold), one with flat segments only. With
200 vectors and ``efSearch`` 128 the graph search is exhaustive, so the lists agree id
for id. A filter that keeps few ids is scored exactly from the stored vectors (a graph
walk would miss most of them); deleted ids stay in the graph but are never returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.config import Settings
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.index.backends.local.dense import DenseSegment, search_segments, write_segment
from memory_pipeline.ingest.loaders import load_text
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings
from tests.index.test_ivf_search import N_DOCS, N_LATER, QUERIES, TEXTS, TOP_N, JitteredHashing, key


def build(base: Path, dense_index: str) -> MemorySystem:
    memory = MemorySystem(
        make_settings(base, ivf_threshold=64, dense_index=dense_index, top_n=TOP_N),
        embedder=JitteredHashing(),
    )
    first = memory.ingest_loaded([load_text(t, f"doc{i}") for i, t in enumerate(TEXTS[:N_DOCS])])
    memory.ingest_loaded([load_text(t, f"doc{N_DOCS + i}") for i, t in enumerate(TEXTS[N_DOCS:])])
    memory.delete_document(first[7].doc_id, update_index=True)
    return memory


@pytest.fixture(scope="module")
def memories(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MemorySystem, MemorySystem]]:
    base = tmp_path_factory.mktemp("hnsw")
    hnsw, flat = build(base / "hnsw", "hnsw"), build(base / "flat", "flat")
    yield hnsw, flat
    hnsw.close()
    flat.close()


def test_the_big_segment_is_a_graph(memories: tuple[MemorySystem, MemorySystem]) -> None:
    hnsw, flat = memories
    a = hnsw.published()
    assert a is not None
    assert [(len(s.ids), s.kind) for s in a.segments] == [(N_DOCS, "hnsw"), (N_LATER, "flat")]
    assert list(flat.settings.index_path.rglob("*.faiss")) == []


@pytest.mark.parametrize("query", QUERIES)
def test_dense_top_n_through_hnsw_equals_flat(
    memories: tuple[MemorySystem, MemorySystem], query: str
) -> None:
    hnsw, flat = memories
    qvec = hnsw.embed(query)
    a, b = hnsw.published(), flat.published()
    assert a is not None and b is not None
    got = search_segments(a.segments, qvec, 30, deleted=a.deleted)
    want = search_segments(b.segments, qvec, 30, deleted=b.deleted)
    assert [i for i, _ in got] == [i for i, _ in want]
    assert not set(a.deleted.tolist()) & {i for i, _ in got}
    few = np.asarray(sorted({i for i, _ in want[20:]} | {3, 50, 120}), dtype=np.int64)
    got = search_segments(a.segments, qvec, 5, deleted=a.deleted, allowed=few)
    want = search_segments(b.segments, qvec, 5, deleted=b.deleted, allowed=few)
    assert [i for i, _ in got] == [i for i, _ in want] and len(got) == 5
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.mark.parametrize("query", QUERIES[:4])
def test_search_hits_through_hnsw_equal_flat(
    memories: tuple[MemorySystem, MemorySystem], query: str
) -> None:
    hnsw, flat = memories
    got = hnsw.query(query, hnsw.settings.search_request(top_k=8, record_access=False))
    want = flat.query(query, flat.settings.search_request(top_k=8, record_access=False))
    assert key(got.hits) == key(want.hits)


def test_a_small_filter_on_a_large_graph_finds_every_allowed_match(tmp_path: Path) -> None:
    """A graph walk with a selector keeping 0.1% of 20,000 vectors finds 3 of the right
    10 (measured); the exact path over the stored vectors finds all of them."""
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((20_000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(10, 20_010, dtype=np.int64)
    write_segment(tmp_path, "g", ids, vectors, ivf_threshold=1, dense_index="hnsw")
    segment = DenseSegment.load(tmp_path, "g")
    allowed = ids[::1000]
    query = vectors[17]
    got = search_segments([segment], query, 10, deleted=np.zeros(0, np.int64), allowed=allowed)
    scores = vectors[::1000] @ query
    want = [int(allowed[i]) for i in np.argsort(-scores)[:10]]
    assert [i for i, _ in got] == want


def test_an_unknown_dense_index_is_refused_by_name() -> None:
    with pytest.raises(InvalidInputError, match="HYBRID_RAG_DENSE_INDEX"):
        Settings.from_env({"HYBRID_RAG_DENSE_INDEX": "annoy"})
    assert Settings.from_env({"HYBRID_RAG_DENSE_INDEX": " HNSW "}).index.dense_index == "hnsw"
