"""Update and rebuild of an index kept in a vector service (Qdrant, Chroma).

A service is not part of the chunks' transactions (as pgvector is): ingest and delete
queue their changes in the store, and ``update`` takes them in. It reads the queue,
the live ids, vectors and texts in one snapshot of the store, drops the deleted ids
from the service, writes the added ones (vectors from the store, never re-embedded)
and only once the service holds them clears those queue entries and records the
version. A crash in between leaves them queued; taking them in again is harmless
(writes replace by id, deleting an absent id does nothing). Until then the searcher
scores queued chunks from the store and drops ids that are no longer live, so what
is ingested is found at once and what is deleted is never returned.

One updater at a time: a file lock in the index folder orders those on one machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path
from typing import Protocol

import numpy as np

from memory_pipeline.errors import ModelMismatchError
from memory_pipeline.index.protocols import IndexView
from memory_pipeline.index.tokenizer import TOKENIZER_ID, tokenize
from memory_pipeline.index.versions import Manifest, now_iso, writer_lock
from memory_pipeline.spaces import DEFAULT_SPACE
from memory_pipeline.store import Store
from memory_pipeline.store.store import Reads
from memory_pipeline.types import IndexUpdateResult

BATCH = 2_000


@dataclass(frozen=True)
class IndexState:
    """What a service records about the index it holds."""

    model_id: str
    dim: int
    version: int
    kind: str
    created_at: str
    tokenizer: str = TOKENIZER_ID

    def manifest(self, n_dense: int, n_sparse: int) -> Manifest:
        return Manifest(
            version=self.version,
            model_id=self.model_id,
            dim=self.dim,
            segments=[],
            n_dense=n_dense,
            n_sparse=n_sparse,
            n_deleted=0,
            watermark=0,
            created_at=self.created_at,
            kind=self.kind,
            tokenizer=self.tokenizer,
        )


@dataclass(frozen=True)
class Batch:
    """Chunks to write: sorted ids, their vectors (one float32 row each), spaces, tokens."""

    ids: np.ndarray
    vectors: np.ndarray
    spaces: list[str]
    tokens: list[list[str]]


class Service(Protocol):
    """What a vector service does for ``QueuedIndex``."""

    def state(self) -> IndexState | None:
        """What the service holds now; None before anything was written."""
        ...

    def view(self) -> IndexView | None: ...

    def apply(self, removed: np.ndarray, added: Iterable[Batch], state: IndexState) -> int:
        """Drop ``removed``, write ``added``, then record ``state``; returns the count held."""
        ...

    def replace(self, added: Iterable[Batch], state: IndexState) -> int:
        """A fresh copy holding only ``added``, swapped in once complete; returns its count."""
        ...

    def drop_older(self) -> None:
        """Remove what it keeps of earlier copies (``IndexUpdater.drop_older``)."""
        ...

    def close(self) -> None: ...


class QueuedIndex:
    """The source of views and the updater of an index fed from the store's change queue."""

    def __init__(self, name: str, store: Store, model_id: str, service: Service, lock: Path):
        self.name = name
        self.store = store
        self.model_id = model_id
        self.service = service
        self.lock = lock

    def current(self) -> IndexView | None:
        return self.service.view()

    def close(self) -> None:
        self.service.close()

    def update(self) -> IndexUpdateResult:
        """Take in the queued changes; the cost follows the size of the change."""
        started = time.perf_counter()
        with writer_lock(self.lock):
            state = self.service.state()
            if state is None or state.tokenizer != TOKENIZER_ID:
                return self._rebuild(started)
            if state.model_id != self.model_id:
                raise ModelMismatchError(
                    f"the {self.name} index holds vectors of {state.model_id!r}, the embedder is "
                    f"{self.model_id!r}; run rebuild-index once vectors of the new model are stored"
                )
            with self.store.snapshot() as reads:
                queue = reads.pending_changes()
                if not queue:
                    return _result(state, "noop", 0, 0, self._held(), started)
                added = np.asarray(sorted(reads.live_ids(queue.adds)), dtype=np.int64)
                batches = self._checked(self._batches(reads, added), state.dim)
                new = replace(state, version=state.version + 1, kind="update", created_at=now_iso())
                first = next(batches, None)
                if first is not None:
                    new = replace(new, dim=int(first.vectors.shape[1]))
                    batches = chain([first], batches)
                held = self.service.apply(queue.deletes, batches, new)
            self.store.clear_changes(queue.seqs)
            return self._record(new, len(added), len(queue.deletes), held, started)

    def rebuild(self) -> IndexUpdateResult:
        """A fresh copy from every stored vector and text, swapped in once complete."""
        started = time.perf_counter()
        with writer_lock(self.lock):
            return self._rebuild(started)

    def drop_older(self) -> None:
        with writer_lock(self.lock):
            self.service.drop_older()

    def _rebuild(self, started: float) -> IndexUpdateResult:
        old = self.service.state()
        with self.store.snapshot() as reads:
            seqs = reads.change_seqs()  # changes queued in this snapshot are covered by it
            batches = self._batches(reads, reads.all_ids())
            first = next(batches, None)
            dim = int(first.vectors.shape[1]) if first is not None else (old.dim if old else 0)
            if not dim:  # nothing stored and nothing written yet
                return IndexUpdateResult(0, "noop", 0, 0, 0, 0, time.perf_counter() - started)
            version = (old.version if old else 0) + 1
            state = IndexState(self.model_id, dim, version, "rebuild", now_iso())
            rest = self._checked(batches, dim)
            held = self.service.replace(chain([first], rest) if first else rest, state)
        self.store.clear_changes(seqs)
        return self._record(state, held, 0, held, started)

    def _batches(self, reads: Reads, ids: np.ndarray) -> Iterator[Batch]:
        """Vectors, spaces and tokens of live chunks, ``BATCH`` at a time."""
        for start in range(0, len(ids), BATCH):
            found, vecs = reads.stored_vectors(ids[start : start + BATCH], self.model_id)
            spaces = reads.spaces_of(found.tolist())
            contents = reads.sparse_texts(found.tolist())
            yield Batch(
                found,
                vecs,
                [spaces.get(int(i), DEFAULT_SPACE) for i in found],
                [tokenize(contents[int(i)]) for i in found],
            )

    def _checked(self, batches: Iterator[Batch], dim: int) -> Iterator[Batch]:
        for batch in batches:
            if dim and batch.vectors.shape[1] != dim:
                raise ModelMismatchError(
                    f"the {self.name} index holds vectors of dimension {dim}, these chunks' "
                    f"vectors of {self.model_id!r} have {batch.vectors.shape[1]}; run "
                    "rebuild-index once vectors of one model are stored"
                )
            dim = int(batch.vectors.shape[1])
            yield batch

    def _held(self) -> int:
        view = self.service.view()
        return view.manifest.n_dense if view else 0

    def _record(
        self, state: IndexState, added: int, removed: int, held: int, started: float
    ) -> IndexUpdateResult:
        self.store.record_index_version(
            version=state.version,
            model_id=state.model_id,
            dim=state.dim,
            n_dense=held,
            n_sparse=held,
            kind=state.kind,
            added=added,
            removed=removed,
        )
        return _result(state, state.kind, added, removed, held, started)


def _result(
    state: IndexState, kind: str, added: int, removed: int, held: int, started: float
) -> IndexUpdateResult:
    return IndexUpdateResult(
        state.version, kind, added, removed, held, held, time.perf_counter() - started
    )
