"""Dense segments: exact scores of chosen ids (used to complete fusion candidates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.index.dense import DenseSegment, scores_for_ids, write_segment


def unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_scores_for_ids_reads_flat_segments_and_names_the_rest(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    flat_ids = np.array([40, 3, 17, 8, 25], dtype=np.int64)  # not sorted on purpose
    flat_vecs = unit(rng, len(flat_ids))
    ivf_ids = np.arange(1000, 1000 + 4096, dtype=np.int64)
    ivf_vecs = unit(rng, len(ivf_ids))
    write_segment(tmp_path, "a", flat_ids, flat_vecs)
    write_segment(tmp_path, "b", ivf_ids, ivf_vecs, ivf_threshold=1000)
    segments = [DenseSegment.load(tmp_path, "a"), DenseSegment.load(tmp_path, "b")]
    query = unit(rng, 1)[0]

    wanted = np.array([17, 25, 40, 8, 1005, 99], dtype=np.int64)
    found, missing = scores_for_ids(segments, query, wanted, deleted=np.array([8], np.int64))
    expected = {int(i): float(v @ query) for i, v in zip(flat_ids, flat_vecs, strict=True)}
    assert dict(found) == pytest.approx({i: expected[i] for i in (17, 25, 40)})
    # 8 is deleted (dropped); the IVF segment and the unknown id are left to the caller.
    assert sorted(missing.tolist()) == [99, 1005]
    found, missing = scores_for_ids(segments, query, np.zeros(0, np.int64), deleted=np.zeros(0))
    assert found == [] and not len(missing)


def test_holds_is_a_membership_mask(tmp_path: Path) -> None:
    write_segment(tmp_path, "a", np.array([9, 2, 5], np.int64), unit(np.random.default_rng(1), 3))
    segment = DenseSegment.load(tmp_path, "a")
    assert segment.holds(np.array([1, 2, 5, 9, 10], np.int64)).tolist() == [
        False,
        True,
        True,
        True,
        False,
    ]
