"""The Chroma backend: vectors in a Chroma collection, BM25 in the project's tantivy files.

``HYBRID_RAG_CHROMA_URL`` (``http://host:port``) names a server; without it an
embedded store lives in ``chroma_path`` (default ``<index_path>/chroma``). Fed from
the store's change queue (``queued``).

* Dense: a collection ``<HYBRID_RAG_INDEX_COLLECTION>-v<version>`` over inner product
  (``hnsw.space = ip``: vectors are unit-norm), ids the chunk ids, embeddings given by
  us (no embedding function: Chroma never loads a model). A result's score is the
  inner product of the query with the vector Chroma returns. An unfiltered search is
  Chroma's HNSW, approximate as HNSW is; a search among ``allowed`` ids, and the scores
  of given ids, are exact: from the vectors stored in the database (an embedded
  collection left by a killed writer can refuse ``get`` by id: "Error finding id").
* BM25: Chroma's full-text search cannot rank by BM25 over our tokens, so the BM25
  side is the local backend's, one tantivy partition per space
  (``local/sparse_spaces.py``), in versioned folders under ``<index_path>/chroma-bm25``
  published as the local index is (``index/versions.py``). Scores equal the local
  backend's, statistics included (tantivy counts deleted documents until its
  segments merge). With a Chroma server these files stay on the machine that writes
  the index: the processes of one memory share that folder.
* The published manifest names the collection and holds the model id, dimension and
  version; the collection's metadata holds them too, on the server. A rebuild fills a
  new collection and publishes it with its BM25 folder, then drops the old one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import chromadb
import numpy as np
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection as ChromaCollection
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import NotFoundError

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index.backends.local.sparse import SparseIndex
from memory_pipeline.index.backends.local.sparse_spaces import (
    DEFAULT_SPACE,
    PartitionedSparse,
    PartitionedView,
    partition_dir,
    partition_dirs,
)
from memory_pipeline.index.backends.queued import Batch, IndexState, QueuedIndex
from memory_pipeline.index.protocols import SparseIndex as SparseSearch
from memory_pipeline.index.versions import (
    Manifest,
    clean_stale,
    dir_size,
    new_temp_dir,
    pointer_stamp,
    publish,
    read_current,
)

if TYPE_CHECKING:
    from memory_pipeline.index.settings import IndexSettings
    from memory_pipeline.store import Store

Ranked = list[tuple[int, float]]
_PAGE = 5_000


def open_chroma(index: IndexSettings, index_path: Path, store: Store, model_id: str) -> QueuedIndex:
    """The backend over the server ``chroma_url``, or else over an embedded store (in
    ``index_path`` unless ``chroma_path`` says where); its BM25 files are in ``index_path``."""
    folder = None if index.chroma_url else index.chroma_path or index_path / "chroma"
    root = index_path / "chroma-bm25"
    service = ChromaService(
        connect_chroma(index.chroma_url, folder),
        index.collection,
        root,
        folder,
        lambda ids: store.vectors_for(ids, model_id),
    )
    return QueuedIndex("chroma", store, model_id, service, root)


def connect_chroma(url: str | None, path: Path | None) -> ClientAPI:
    """A client of the server at ``url``, or else of the embedded store in ``path``."""
    settings = ChromaSettings(anonymized_telemetry=False)
    if url is None:
        assert path is not None, "an embedded store needs a folder"
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        client = chromadb.HttpClient(
            host=parts.hostname or "localhost",
            port=parts.port or (443 if parts.scheme == "https" else 8000),
            ssl=parts.scheme == "https",
            settings=settings,
        )
        client.heartbeat()
    except (ValueError, OSError) as exc:
        raise IndexUnavailableError(
            f"the Chroma server at {url} did not answer ({exc}); start it, check "
            "HYBRID_RAG_CHROMA_URL, or use HYBRID_RAG_INDEX_BACKEND=local"
        ) from exc
    return client


# (ids, vectors) of the given chunk ids, from the store (its vectors are the ones indexed)
Vectors = Callable[[list[int]], tuple[np.ndarray, np.ndarray]]


def _best(ids: np.ndarray, vecs: np.ndarray, query: np.ndarray, top_n: int | None) -> Ranked:
    if not len(ids):
        return []
    scores = vecs @ query.astype(np.float32)
    out = [(int(i), float(s)) for i, s in zip(ids, scores, strict=True)]
    out.sort(key=lambda p: (-p[1], p[0]))
    return out if top_n is None else out[:top_n]


@dataclass(frozen=True)
class ChromaDense:
    """Chroma's HNSW for a plain search; the stored vectors for exact scores (a filtered
    search, the other retriever's candidates): exact, and never at the mercy of a
    collection left inconsistent by a killed writer (Chroma's "Error finding id")."""

    collection: ChromaCollection
    held: int
    vectors: Vectors

    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        if top_n <= 0 or not self.held or (allowed is not None and not len(allowed)):
            return []
        if allowed is not None:  # exact: every allowed vector it holds
            return _best(*self.vectors(allowed.tolist()), query, top_n)
        got = self.collection.query(
            query_embeddings=[query.astype(np.float32).tolist()],
            n_results=min(top_n, self.held),
            include=["embeddings"],
        )
        ids = np.asarray([int(i) for i in got["ids"][0]], dtype=np.int64)
        embeddings = got["embeddings"]
        vecs = np.asarray(embeddings[0] if embeddings else [], dtype=np.float32)
        return _best(ids, vecs, query, top_n)

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        held, vecs = self.vectors(ids.tolist())
        return _best(held, vecs, query, None), np.setdiff1d(np.asarray(ids, np.int64), held)

    def member_ids(self) -> np.ndarray:
        ids: list[int] = []
        while True:
            got = self.collection.get(include=[], limit=_PAGE, offset=len(ids))
            ids.extend(int(i) for i in got["ids"])
            if len(got["ids"]) < _PAGE:
                return np.asarray(sorted(ids), dtype=np.int64)


@dataclass
class ChromaView(PartitionedView):
    """One published version: its collection and its BM25 partitions."""

    manifest: Manifest
    path: Path
    collection: ChromaCollection
    partitions: PartitionedSparse
    sparse: SparseSearch  # the partitions of the spaces this view reads
    folder: Path | None  # the embedded store's folder
    vectors: Vectors

    @property
    def dense(self) -> ChromaDense:
        return ChromaDense(self.collection, self.manifest.n_dense, self.vectors)

    def size_bytes(self) -> int:
        return dir_size(self.path) + (dir_size(self.folder) if self.folder else 0)


class _Partitions:
    """The BM25 partitions of a version being written (cloned from its parent's)."""

    def __init__(self, tmp: Path, parent: Path | None) -> None:
        self.tmp = tmp
        self.parts: dict[str, SparseIndex] = {}
        for space, src in partition_dirs(parent).items() if parent else ():
            SparseIndex.clone(src, partition_dir(tmp, space))
            self.parts[space] = SparseIndex.open(partition_dir(tmp, space), writable=True)
        self.part(DEFAULT_SPACE)  # sparse/ always exists

    def part(self, space: str) -> SparseIndex:
        if space not in self.parts:
            path = partition_dir(self.tmp, space)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.parts[space] = SparseIndex.create(path)
        return self.parts[space]

    def delete(self, ids: np.ndarray) -> None:
        for part in self.parts.values():
            part.delete(int(i) for i in ids)

    def add(self, batch: Batch) -> None:
        by_space: dict[str, list[tuple[int, list[str]]]] = {}
        for cid, space, tokens in zip(batch.ids.tolist(), batch.spaces, batch.tokens, strict=True):
            by_space.setdefault(space, []).append((cid, tokens))
        for space, items in by_space.items():
            self.part(space).add(items)

    def finish(self) -> int:
        total = 0
        for part in self.parts.values():
            part.commit()
            total += part.num_docs
            part.close()
        return total

    def close(self) -> None:
        for part in self.parts.values():
            part.close()


class ChromaService:
    """The published collection and BM25 folder: state, views, writes (``queued``)."""

    def __init__(
        self, client: ClientAPI, name: str, root: Path, folder: Path | None, vectors: Vectors
    ) -> None:
        self.client = client
        self.vectors = vectors
        self.name = name
        self.root = root
        self.folder = folder
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, bytes] | None = None
        self._view: ChromaView | None = None

    def close(self) -> None:
        """Nothing to release: the client's files close with the process."""

    def drop_older(self) -> None:
        """The BM25 partitions of earlier versions go; Chroma's own files keep what its
        SQLite and segments keep of deleted collections (docs/hygiene.md)."""
        found = read_current(self.root)
        clean_stale(self.root, found[0].version if found else None, keep=1)

    def state(self) -> IndexState | None:
        found = read_current(self.root)
        if found is None:
            return None
        m = found[0]
        return IndexState(m.model_id, m.dim, m.version, m.kind, m.created_at, m.tokenizer)

    def view(self) -> ChromaView | None:
        with self._lock:
            stamp = pointer_stamp(self.root)
            if stamp != self._stamp or (stamp is not None and self._view is None):
                self._view = self._load() if stamp is not None else None
                self._stamp = stamp
            return self._view

    def _load(self) -> ChromaView | None:
        found = read_current(self.root)
        if found is None:
            return None
        manifest, vdir = found
        collection = self._collection(str(manifest.extra["collection"]))
        parts = PartitionedSparse.open(vdir)
        return ChromaView(
            manifest, vdir, collection, parts, parts.view(None), self.folder, self.vectors
        )

    def _collection(self, name: str) -> ChromaCollection:
        try:
            return self.client.get_collection(name, embedding_function=None)
        except NotFoundError as exc:
            raise IndexUnavailableError(
                f"the Chroma collection {name!r} named by {self.root} is missing ({exc}); "
                "run rebuild-index"
            ) from exc

    def apply(self, removed: np.ndarray, added: Iterable[Batch], state: IndexState) -> int:
        found = read_current(self.root)
        if found is None:
            raise IndexUnavailableError(f"no published index in {self.root}; run rebuild-index")
        parent, vdir = found
        collection = self._collection(str(parent.extra["collection"]))
        gone = [str(i) for i in removed.tolist()]
        for start in range(0, len(gone), _PAGE):
            collection.delete(ids=gone[start : start + _PAGE])
        tmp = new_temp_dir(self.root, state.version)
        parts = _Partitions(tmp, vdir)
        try:
            parts.delete(removed)
            for batch in added:
                collection.upsert(ids=[str(i) for i in batch.ids], embeddings=batch.vectors)
                parts.add(batch)
            n_sparse = parts.finish()
        finally:
            parts.close()
        return self._publish(tmp, collection, state, n_sparse)

    def replace(self, added: Iterable[Batch], state: IndexState) -> int:
        old = read_current(self.root)
        name = f"{self.name}-v{state.version}"
        if name in {c.name for c in self.client.list_collections()}:
            self.client.delete_collection(name)  # left by a rebuild that did not finish
        collection = self.client.create_collection(
            name,
            configuration={"hnsw": {"space": "ip"}},
            metadata=_metadata(state),
            embedding_function=None,
        )
        tmp = new_temp_dir(self.root, state.version)
        parts = _Partitions(tmp, None)
        try:
            for batch in added:
                collection.upsert(ids=[str(i) for i in batch.ids], embeddings=batch.vectors)
                parts.add(batch)
            n_sparse = parts.finish()
            held = self._publish(tmp, collection, state, n_sparse)
        except BaseException:
            parts.close()
            self.client.delete_collection(name)
            raise
        if old is not None and old[0].extra.get("collection") != name:
            with contextlib.suppress(NotFoundError):  # already gone: nothing to drop
                self.client.delete_collection(str(old[0].extra["collection"]))
        return held

    def _publish(
        self, tmp: Path, collection: ChromaCollection, state: IndexState, n_sparse: int
    ) -> int:
        held = collection.count()
        manifest = replace(state.manifest(held, n_sparse), extra={"collection": collection.name})
        publish(self.root, tmp, manifest)
        collection.modify(metadata=_metadata(state))
        clean_stale(self.root, state.version)
        return held


def _metadata(state: IndexState) -> dict[str, Any]:
    return {
        "model_id": state.model_id,
        "dim": state.dim,
        "version": state.version,
        "kind": state.kind,
        "tokenizer": state.tokenizer,
    }
