"""Dense segments: exact scores of chosen ids (used to complete fusion candidates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_pipeline.index.backends.local.dense import DenseSegment, scores_for_ids, write_segment


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


def _write_versions(tmp_path: Path, batches: list[np.ndarray], dim: int = 16):  # type: ignore[no-untyped-def]
    """One SegmentWriter per batch, each version starting from the last one's state."""
    from memory_pipeline.index.backends.local.dense import SegmentWriter

    rng = np.random.default_rng(3)
    writer = SegmentWriter(tmp_path, 1)
    vectors: dict[int, np.ndarray] = {}
    for version, ids in enumerate(batches, start=1):
        writer = SegmentWriter(
            tmp_path,
            version,
            segments=writer.segments,
            seg_ids=writer.seg_ids,
            deleted=writer.deleted,
        )
        vecs = unit(rng, len(ids), dim)
        vectors.update(zip(ids.tolist(), vecs, strict=True))
        writer.add(ids, vecs)
        writer.finish()
    return writer, vectors


def test_many_small_segments_fold_into_one_beside_the_largest(tmp_path: Path) -> None:
    from memory_pipeline.index.backends.local.dense import MAX_SEGMENTS

    batches = [np.arange(0, 100, dtype=np.int64)]
    batches += [np.arange(100 + 10 * i, 110 + 10 * i, dtype=np.int64) for i in range(MAX_SEGMENTS)]
    writer, vectors = _write_versions(tmp_path, batches)
    names = sorted(s.name for s in writer.segments)
    assert len(names) == 2 and names[0].startswith("mrg") and names[1] == "seg000001"
    assert sorted(writer.held().tolist()) == sorted(vectors)
    merged = DenseSegment.load(tmp_path, names[0])
    assert merged.ids.tolist() == list(range(100, 100 + 10 * MAX_SEGMENTS))
    # Files of the folded segments are gone; the vectors moved over unchanged.
    assert not list(tmp_path.glob("seg000002.*"))
    stored = np.load(tmp_path / f"{names[0]}.vecs.npy")
    assert np.allclose(stored[0], vectors[100])


def test_deletes_past_their_share_fold_everything_without_them(tmp_path: Path) -> None:
    from memory_pipeline.index.backends.local.dense import MAX_DELETED_FRACTION, SegmentWriter

    writer, _vectors = _write_versions(tmp_path, [np.arange(0, 50, dtype=np.int64)])
    doomed = np.arange(0, int(50 * MAX_DELETED_FRACTION), dtype=np.int64)  # at the share: kept
    w2 = SegmentWriter(
        tmp_path, 2, segments=writer.segments, seg_ids=writer.seg_ids, deleted=writer.deleted
    )
    w2.delete(doomed)
    segments, deleted = w2.finish()
    assert [s.name for s in segments] == ["seg000001"] and len(deleted) == len(doomed)
    w2.delete(np.array([49], dtype=np.int64))  # one more: past the share
    segments, deleted = w2.finish()
    assert [s.name for s in segments] == ["mrg000002"] and len(deleted) == 0
    assert w2.held().tolist() == list(range(len(doomed), 49)) and w2.live == 49 - len(doomed)
