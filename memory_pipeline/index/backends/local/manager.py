"""The index writer: incremental updates and full rebuilds from the store.

Both take the writer lock, build the next version beside the published one and
publish it atomically (see ``versions``). Neither ever re-embeds: vectors come
from the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.index import versions as v
from memory_pipeline.index.backends.local.dense import (
    DEFAULT_DENSE_INDEX,
    DEFAULT_IVF_THRESHOLD,
    SegmentWriter,
)
from memory_pipeline.index.backends.local.reader import load_deleted
from memory_pipeline.index.backends.local.sparse import SparseIndex
from memory_pipeline.index.backends.local.sparse_spaces import (
    DEFAULT_SPACE,
    partition_dir,
    partition_dirs,
)
from memory_pipeline.index.protocols import DenseWriter, SparseWriter
from memory_pipeline.index.tokenizer import TOKENIZER_ID, tokenize
from memory_pipeline.store import Store
from memory_pipeline.store.failures import INDEX_UNCHANGED, storage_error
from memory_pipeline.store.store import Reads
from memory_pipeline.types import IndexUpdateResult

log = logging.getLogger(__name__)

_CONTENT_BATCH = 5_000


class IndexWriter:
    def __init__(
        self,
        store: Store,
        root: Path,
        model_id: str,
        *,
        ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
        dense_index: str = DEFAULT_DENSE_INDEX,
    ) -> None:
        self.store = store
        self.root = root
        self.model_id = model_id
        self.ivf_threshold = ivf_threshold
        self.dense_index = dense_index

    # ------------------------------------------------------------------ public
    def update(self) -> IndexUpdateResult:
        """Take in the store's queued changes: add new chunks, drop deleted ones.

        Reads only the change queue and the published segment ids, so the cost
        follows the size of the change, not of the corpus.
        """
        started = time.perf_counter()
        with _writing(self.root), v.writer_lock(self.root):
            current = v.read_current(self.root)
            if current is None:
                return self._rebuild_locked(started)
            manifest, vdir = current
            if manifest.model_id != self.model_id:
                raise ModelMismatchError(
                    f"the published index holds vectors of {manifest.model_id!r}, the embedder is "
                    f"{self.model_id!r}; run rebuild-index once vectors of the new model are stored"
                )
            if manifest.stale_tokens:
                # Its BM25 terms were made by other rules; queries would miss them.
                return self._rebuild_locked(started)
            v.clean_stale(self.root, manifest.version)
            # Every read of the store below sees one instant: a chunk deleted meanwhile is
            # either wholly in this version (and its queued delete drops it next time) or
            # wholly absent, never a dense entry without its text.
            with self.store.snapshot() as reads:
                return self._update_locked(reads, manifest, vdir, started)

    def _update_locked(
        self, reads: Reads, manifest: v.Manifest, vdir: Path, started: float
    ) -> IndexUpdateResult:
        queue = reads.pending_changes()
        if not queue:
            return _noop(manifest, started)
        seg_ids = {s.name: np.load(vdir / "dense" / f"{s.name}.ids.npy") for s in manifest.segments}
        held = np.concatenate(list(seg_ids.values())) if seg_ids else np.zeros(0, np.int64)
        deleted = load_deleted(vdir)
        live_adds = np.asarray(sorted(reads.live_ids(queue.adds)), dtype=np.int64)
        # A queued add may already be held (a crash after publishing, a rebuild that
        # raced the queue): never index an id twice.
        added = live_adds[~np.isin(live_adds, held)]
        removed = queue.deletes[np.isin(queue.deletes, held) & ~np.isin(queue.deletes, deleted)]
        if np.isin(live_adds, deleted).any():
            # An id coming back after deletion would resurrect its old copy; rebuild instead.
            return self._rebuild_from(reads, started)
        if not len(added) and not len(removed):
            self.store.clear_changes(queue.seqs)
            return _noop(manifest, started)

        version = manifest.version + 1
        tmp = v.new_temp_dir(self.root, version)
        v.link_tree(vdir / "dense", tmp / "dense")
        dense: DenseWriter = SegmentWriter(
            tmp / "dense",
            version,
            ivf_threshold=self.ivf_threshold,
            dense_index=self.dense_index,
            segments=list(manifest.segments),
            seg_ids=seg_ids,
            deleted=deleted,
        )
        dense.delete(removed)
        add_ids, add_vecs = reads.stored_vectors(added, self.model_id)
        dim = manifest.dim or (int(add_vecs.shape[1]) if add_vecs.size else 0)
        dense.add(add_ids, add_vecs)
        segments, deleted = dense.finish()
        np.save(tmp / "deleted.npy", deleted)

        n_sparse = self._update_sparse(reads, vdir, tmp, add_ids, removed)

        n_dense = sum(s.count for s in segments) - len(deleted)
        new = v.Manifest(
            version=version,
            model_id=self.model_id,
            dim=dim,
            segments=segments,
            n_dense=n_dense,
            n_sparse=n_sparse,
            n_deleted=len(deleted),
            watermark=max(manifest.watermark, int(add_ids.max()) if len(add_ids) else 0),
            created_at=v.now_iso(),
            kind="update",
            parent=manifest.version,
            tokenizer=TOKENIZER_ID,
        )
        v.publish(self.root, tmp, new)
        self.store.clear_changes(queue.seqs)
        return self._finish(new, len(add_ids), len(removed), started)

    def rebuild(self) -> IndexUpdateResult:
        """A fresh version from every stored vector and chunk text; no re-embedding."""
        started = time.perf_counter()
        with _writing(self.root), v.writer_lock(self.root):
            return self._rebuild_locked(started)

    def drop_older(self) -> None:
        """Remove every version but the published one (and any crashed writer's folder);
        a reader still on an older one keeps its open files."""
        with v.writer_lock(self.root):
            current = v.read_current(self.root)
            v.clean_stale(self.root, current[0].version if current else None, keep=1)

    # ----------------------------------------------------------------- helpers
    def _rebuild_locked(self, started: float) -> IndexUpdateResult:
        with self.store.snapshot() as reads:
            return self._rebuild_from(reads, started)

    def _rebuild_from(self, reads: Reads, started: float) -> IndexUpdateResult:
        """A fresh version of everything ``reads`` sees (one snapshot of the store)."""
        current = v.read_current(self.root)
        parent = current[0].version if current else None
        v.clean_stale(self.root, parent)
        version = (parent or 0) + 1
        tmp = v.new_temp_dir(self.root, version)
        (tmp / "dense").mkdir()
        # Changes queued in this snapshot are covered by it; later ones stay queued.
        seqs = reads.change_seqs()
        ids, vecs = reads.stored_vectors(reads.all_ids(), self.model_id)
        dim = int(vecs.shape[1]) if vecs.size else 0
        dense: DenseWriter = SegmentWriter(
            tmp / "dense", version, ivf_threshold=self.ivf_threshold, dense_index=self.dense_index
        )
        dense.add(ids, vecs)
        segments, _ = dense.finish()
        np.save(tmp / "deleted.npy", np.zeros(0, dtype=np.int64))
        n_sparse = 0
        by_space = _by_space(reads, ids)
        by_space.setdefault(DEFAULT_SPACE, np.zeros(0, dtype=np.int64))  # sparse/ always exists
        for space, space_ids in sorted(by_space.items()):
            sparse: SparseWriter = SparseIndex.create(partition_dir(tmp, space))
            for start in range(0, len(space_ids), _CONTENT_BATCH):
                sparse.add(self._tokens(reads, space_ids[start : start + _CONTENT_BATCH]))
            sparse.commit()
            n_sparse += sparse.num_docs
            sparse.close()
        manifest = v.Manifest(
            version=version,
            model_id=self.model_id,
            dim=dim,
            segments=segments,
            n_dense=len(ids),
            n_sparse=n_sparse,
            n_deleted=0,
            watermark=int(ids.max()) if len(ids) else 0,
            created_at=v.now_iso(),
            kind="rebuild",
            parent=parent,
            tokenizer=TOKENIZER_ID,
        )
        v.publish(self.root, tmp, manifest)
        self.store.clear_changes(seqs)
        return self._finish(manifest, len(ids), 0, started)

    def _finish(
        self, manifest: v.Manifest, added: int, removed: int, started: float
    ) -> IndexUpdateResult:
        self.store.record_index_version(
            version=manifest.version,
            model_id=manifest.model_id,
            dim=manifest.dim,
            n_dense=manifest.n_dense,
            n_sparse=manifest.n_sparse,
            kind=manifest.kind,
            added=added,
            removed=removed,
        )
        v.clean_stale(self.root, manifest.version)
        return IndexUpdateResult(
            manifest.version,
            manifest.kind,
            added,
            removed,
            manifest.n_dense,
            manifest.n_sparse,
            time.perf_counter() - started,
        )

    def _update_sparse(
        self, reads: Reads, vdir: Path, tmp: Path, add_ids: np.ndarray, removed: np.ndarray
    ) -> int:
        """The new version's BM25 partitions: each of the parent's, cloned, loses the
        removed ids; each space with new chunks gains them (a new space, a new partition).
        Returns the documents they hold."""
        parents = partition_dirs(vdir)
        adds = _by_space(reads, add_ids)
        total = 0
        for space in sorted(set(parents) | set(adds)):
            dst = partition_dir(tmp, space)
            if space in parents:
                SparseIndex.clone(parents[space], dst)
                sparse: SparseWriter = SparseIndex.open(dst, writable=True)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                sparse = SparseIndex.create(dst)
            sparse.delete(int(i) for i in removed)
            if space in adds:
                sparse.add(self._tokens(reads, adds[space]))
            sparse.commit()
            total += sparse.num_docs
            sparse.close()
        return total

    def _tokens(self, reads: Reads, ids: Iterable[int]) -> list[tuple[int, list[str]]]:
        contents = reads.sparse_texts([int(i) for i in ids])
        return [(cid, tokenize(text)) for cid, text in contents.items()]


@contextmanager
def _writing(root: Path) -> Iterator[None]:
    """A full disk, a read-only folder or an I/O error while writing a version is a
    ``StorageError``; the half-written version is left for the next writer to delete."""
    try:
        yield
    except OSError as exc:
        error = storage_error(exc, f"the index folder {root}", INDEX_UNCHANGED)
        if error is None:
            raise
        raise error from exc


def _by_space(reads: Reads, ids: np.ndarray) -> dict[str, np.ndarray]:
    """``ids`` (sorted) grouped by the space their chunks belong to."""
    spaces = reads.spaces_of(ids.tolist())
    out: dict[str, list[int]] = {}
    for cid in ids.tolist():
        out.setdefault(spaces.get(cid, DEFAULT_SPACE), []).append(cid)
    return {s: np.asarray(v, dtype=np.int64) for s, v in out.items()}


def _noop(manifest: v.Manifest, started: float) -> IndexUpdateResult:
    """Nothing to take in: the published version stays as it is."""
    return IndexUpdateResult(
        manifest.version,
        "noop",
        0,
        0,
        manifest.n_dense,
        manifest.n_sparse,
        time.perf_counter() - started,
    )
