"""The Qdrant backend: vectors and BM25 weights in one Qdrant collection.

``HYBRID_RAG_QDRANT_URL`` names a server (with ``HYBRID_RAG_QDRANT_API_KEY``); without
it Qdrant's local mode keeps the collection in ``qdrant_path`` (default
``<index_path>/qdrant``). Local mode locks its folder: one process at a time, and the
memories of that process on one folder share one client. Fed from the store's change
queue (``queued``).

``HYBRID_RAG_INDEX_COLLECTION`` is an alias of the collection ``<name>-v<version>``
that holds, per chunk, a point whose id is the chunk id, with

* ``dense``: its stored vector (``Distance.DOT``: vectors are unit-norm);
* ``bm25``: the BM25 document weight ``(k1 + 1) tf / (tf + k1 (1 - b + b dl / avgdl))``
  of each of its tokens (``index/tokenizer.py``; ``dl`` quantised as tantivy does,
  ``index/bm25.py``), keyed by a 32-bit hash of the token; Qdrant applies the idf at
  query time (``Modifier.IDF`` is Lucene's idf, the one ``bm25.py`` uses: over one
  batch of writes, scores equal the local backend's to float32 precision);
* payload ``space``, ``length`` (its token count) and ``terms`` (its distinct tokens,
  which give the document frequencies ``score_external`` needs).

The collection's metadata holds the model id, dimension, version, token rules and,
per space, the documents and tokens indexed. A rebuild fills ``<name>-v<version+1>``
and moves the alias to it at once. The retriever fuses the two lists; Qdrant ranks
each.

Filters act before the cut: ``allowed`` ids are a ``HasIdCondition``, searched
exactly (``exact=True``; local mode is always exact); a space is a payload condition,
and idf is computed over the live points of the spaces read (``IdfCorpusParams``).
Unfiltered dense search on a server is Qdrant's HNSW, approximate as HNSW is.

What is approximate in BM25: a point's weights use its space's average length as it
stood when the point was written (after the write of its batch of up to 2,000
chunks). Later updates move the average without rewriting older points, so after
many changes scores drift from the exact ones until ``rebuild-index``. Tokens that
share a 32-bit hash count as one term in Qdrant's ranking. Reading several spaces,
idf and the average length are those of their union (the local backend merges
per-space scores instead). A crash between writing points and their metadata leaves
the per-space counts off until ``rebuild-index``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from qdrant_client import QdrantClient, models

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.qdrant.client import connect, release
from memory_pipeline.index.backends.qdrant.search import (
    DENSE,
    PAGE,
    SPARSE,
    QdrantView,
    Totals,
    doc_vector,
)
from memory_pipeline.index.backends.queued import Batch, IndexState, QueuedIndex

if TYPE_CHECKING:
    from memory_pipeline.index.settings import IndexSettings
    from memory_pipeline.store import Store


def open_qdrant(index: IndexSettings, index_path: Path, store: Store, model_id: str) -> QueuedIndex:
    """The backend over the server ``qdrant_url``, or else over local mode's folder (in
    ``index_path`` unless ``qdrant_path`` says where)."""
    folder = None if index.qdrant_url else index.qdrant_path or index_path / "qdrant"
    client = connect(index.qdrant_url, index.qdrant_api_key, folder)
    service = QdrantService(
        client, index.collection, remote=index.qdrant_url is not None, folder=folder
    )
    return QueuedIndex("qdrant", store, model_id, service, index_path)


class QdrantService:
    """The collection behind the alias: its state, its views, its writes (``queued``)."""

    def __init__(self, client: QdrantClient, alias: str, *, remote: bool, folder: Path | None):
        self.client = client
        self.alias = alias
        self.remote = remote
        self.folder = folder

    def _target(self) -> str | None:
        for a in self.client.get_aliases().aliases:
            if a.alias_name == self.alias:
                return a.collection_name
        if self.client.collection_exists(self.alias):
            raise IndexUnavailableError(
                f"Qdrant holds a collection named {self.alias!r} that this memory did not make; "
                "choose another HYBRID_RAG_INDEX_COLLECTION or remove that collection"
            )
        return None

    def _read(self) -> tuple[IndexState, Totals] | None:
        target = self._target()
        if target is None:
            return None
        meta = self.client.get_collection(target).config.metadata or {}
        if "model_id" not in meta:
            raise IndexUnavailableError(
                f"the Qdrant collection {target!r} has no index metadata; run rebuild-index"
            )
        state = IndexState(
            str(meta["model_id"]),
            int(meta["dim"]),
            int(meta["version"]),
            str(meta["kind"]),
            str(meta["created_at"]),
            str(meta["tokenizer"]),
        )
        return state, {str(s): [int(n), int(t)] for s, (n, t) in meta["spaces"].items()}

    def close(self) -> None:
        release(self.client)

    def state(self) -> IndexState | None:
        found = self._read()
        return found[0] if found else None

    def view(self) -> QdrantView | None:
        found = self._read()
        if found is None:
            return None
        state, totals = found
        n = self.client.count(self.alias, exact=True).count
        return QdrantView(
            state.manifest(n, n), self.client, self.alias, self.remote, totals, self.folder
        )

    def apply(self, removed: np.ndarray, added: Iterable[Batch], state: IndexState) -> int:
        target = self._target()
        found = self._read()
        if target is None or found is None:
            raise IndexUnavailableError(
                f"the Qdrant alias {self.alias!r} is gone; run rebuild-index"
            )
        totals = found[1]
        self._forget(target, removed.tolist(), totals)
        for batch in added:
            self._forget(target, batch.ids.tolist(), totals)  # a point written again
            self._write(target, batch, totals)
        self._set_state(target, state, totals)
        return self.client.count(target, exact=True).count

    def replace(self, added: Iterable[Batch], state: IndexState) -> int:
        old = self._target()
        target = f"{self.alias}-v{state.version}"
        if self.client.collection_exists(target):  # left by a rebuild that did not finish
            self.client.delete_collection(target)
        self.client.create_collection(
            target,
            vectors_config={
                DENSE: models.VectorParams(size=state.dim, distance=models.Distance.DOT)
            },
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        try:
            if self.remote:
                for field in ("space", "terms"):
                    self.client.create_payload_index(
                        target, field, models.PayloadSchemaType.KEYWORD
                    )
            totals: Totals = {}
            for batch in added:
                self._write(target, batch, totals)
            self._set_state(target, state, totals)
        except BaseException:
            self.client.delete_collection(target)
            raise
        ops: list[Any] = []
        if old is not None:
            ops.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=self.alias))
            )
        ops.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=target, alias_name=self.alias)
            )
        )
        self.client.update_collection_aliases(change_aliases_operations=ops)
        if old is not None and old != target:
            self.client.delete_collection(old)
        return self.client.count(target, exact=True).count

    def _forget(self, target: str, ids: list[int], totals: Totals) -> None:
        """Delete the points of ``ids`` it holds, taking them out of the totals."""
        for start in range(0, len(ids), PAGE):
            part = ids[start : start + PAGE]
            held = self.client.retrieve(target, part, with_payload=["space", "length"])
            for p in held:
                counts = totals[str(p.payload["space"])]  # type: ignore[index]
                counts[0] -= 1
                counts[1] -= int(p.payload["length"])  # type: ignore[index]
            if held:
                self.client.delete(
                    target, models.PointIdsList(points=[p.id for p in held]), wait=True
                )

    def _write(self, target: str, batch: Batch, totals: Totals) -> None:
        for space, tokens in zip(batch.spaces, batch.tokens, strict=True):
            counts = totals.setdefault(space, [0, 0])
            counts[0] += 1
            counts[1] += len(tokens)
        points = [
            models.PointStruct(
                id=int(cid),
                vector={
                    DENSE: vec.tolist(),
                    SPARSE: doc_vector(tokens, max(totals[space][1] / totals[space][0], 1e-9)),
                },
                payload={
                    "space": space,
                    "length": len(tokens),
                    "terms": bm25.distinct_terms(tokens),
                },
            )
            for cid, vec, space, tokens in zip(
                batch.ids, batch.vectors, batch.spaces, batch.tokens, strict=True
            )
        ]
        self.client.upsert(target, points, wait=True)

    def _set_state(self, target: str, state: IndexState, totals: Totals) -> None:
        meta = {
            "model_id": state.model_id,
            "dim": state.dim,
            "version": state.version,
            "kind": state.kind,
            "created_at": state.created_at,
            "tokenizer": state.tokenizer,
            "spaces": totals,
        }
        self.client.update_collection(target, metadata=meta)
