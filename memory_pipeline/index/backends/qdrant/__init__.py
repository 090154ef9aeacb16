"""The Qdrant backend: vectors and BM25 weights in one Qdrant collection.

Which Qdrant runs it (``engine.Engine``):

* ``HYBRID_RAG_QDRANT_URL`` set: that server (with ``HYBRID_RAG_QDRANT_API_KEY``);
* otherwise ``HYBRID_RAG_QDRANT_MODE``: ``edge`` (the default), Qdrant Edge, Qdrant's
  own Rust engine in this process, in ``qdrant_path`` (default
  ``<index_path>/qdrant-edge``); or ``local``, qdrant-client's pure-Python local mode
  in ``qdrant_path`` (default ``<index_path>/qdrant``), exact but seconds per BM25
  query past ~20k chunks.

Both in-process engines lock their folder: one process at a time, and the memories of
that process on one folder share it. Fed from the store's change queue (``queued``).

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
exactly on an indexed engine (local mode is always exact); a space is a payload
condition, and idf is computed over the live points of the spaces read
(``IdfCorpusParams``). Unfiltered dense search on an indexed engine (a server, Edge) is
Qdrant's HNSW once a segment is large enough, approximate as HNSW is.

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
from typing import TYPE_CHECKING

import numpy as np

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.qdrant.engine import PAGE, Engine, PointData
from memory_pipeline.index.backends.qdrant.search import QdrantView, Totals, doc_vector
from memory_pipeline.index.backends.queued import Batch, IndexState, QueuedIndex

if TYPE_CHECKING:
    from memory_pipeline.index.settings import IndexSettings
    from memory_pipeline.store import Store

# HYBRID_RAG_QDRANT_MODE without a URL -> the folder under the index folder it defaults to
FOLDERS = {"edge": "qdrant-edge", "local": "qdrant"}


def open_engine(index: IndexSettings, index_path: Path) -> Engine:
    """The server ``qdrant_url``, or else the in-process engine ``qdrant_mode`` names."""
    if index.qdrant_url is None and index.qdrant_mode == "edge":
        from memory_pipeline.index.backends.qdrant.edge import EdgeEngine

        return EdgeEngine(index.qdrant_path or index_path / FOLDERS["edge"])
    from memory_pipeline.index.backends.qdrant.client import ClientEngine

    folder = None if index.qdrant_url else index.qdrant_path or index_path / FOLDERS["local"]
    return ClientEngine(index.qdrant_url, index.qdrant_api_key, folder)


def open_qdrant(index: IndexSettings, index_path: Path, store: Store, model_id: str) -> QueuedIndex:
    """The backend over the engine ``open_engine`` picks."""
    service = QdrantService(open_engine(index, index_path), index.collection)
    return QueuedIndex("qdrant", store, model_id, service, index_path)


class QdrantService:
    """The collection behind the alias: its state, its views, its writes (``queued``)."""

    def __init__(self, engine: Engine, alias: str):
        self.engine = engine
        self.alias = alias

    def _read(self) -> tuple[IndexState, Totals, int] | None:
        """The index's state, its BM25 totals per space and its number of points (kept
        with them by every write: counting them exactly took 80 ms a search at 1M)."""
        target = self.engine.target(self.alias)
        if target is None:
            return None
        meta = self.engine.metadata(target)
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
        totals = {str(s): [int(n), int(t)] for s, (n, t) in meta["spaces"].items()}
        points = meta.get("points")  # absent in a collection written before it was kept
        return state, totals, int(points) if points is not None else self.engine.count(target)

    def close(self) -> None:
        self.engine.close()

    def drop_older(self) -> None:
        """A rebuild wrote a new collection and deleted the old one; what the Qdrant server
        or engine still keeps of it (its segments until optimised, its write-ahead log) is
        its own (docs/hygiene.md)."""

    def state(self) -> IndexState | None:
        found = self._read()
        return found[0] if found else None

    def view(self) -> QdrantView | None:
        found = self._read()
        if found is None:
            return None
        state, totals, n = found
        return QdrantView(state.manifest(n, n), self.engine, self.alias, totals)

    def apply(self, removed: np.ndarray, added: Iterable[Batch], state: IndexState) -> int:
        target = self.engine.target(self.alias)
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
        return self._set_state(target, state, totals)

    def replace(self, added: Iterable[Batch], state: IndexState) -> int:
        old = self.engine.target(self.alias)
        target = f"{self.alias}-v{state.version}"
        if self.engine.exists(target):  # left by a rebuild that did not finish
            self.engine.drop(target)
        self.engine.create(target, state.dim)
        try:
            totals: Totals = {}
            for batch in added:
                self._write(target, batch, totals)
            n = self._set_state(target, state, totals)
        except BaseException:
            self.engine.drop(target)
            raise
        self.engine.point_alias(self.alias, target)
        if old is not None and old != target:
            self.engine.drop(old)
        return n

    def _forget(self, target: str, ids: list[int], totals: Totals) -> None:
        """Delete the points of ``ids`` it holds, taking them out of the totals."""
        for start in range(0, len(ids), PAGE):
            part = ids[start : start + PAGE]
            held = self.engine.retrieve(target, part, payload=["space", "length"], dense=False)
            for p in held:
                counts = totals[str(p.payload["space"])]
                counts[0] -= 1
                counts[1] -= int(p.payload["length"])
            if held:
                self.engine.delete(target, [p.id for p in held])

    def _write(self, target: str, batch: Batch, totals: Totals) -> None:
        for space, tokens in zip(batch.spaces, batch.tokens, strict=True):
            counts = totals.setdefault(space, [0, 0])
            counts[0] += 1
            counts[1] += len(tokens)
        points = []
        for cid, vec, space, tokens in zip(
            batch.ids, batch.vectors, batch.spaces, batch.tokens, strict=True
        ):
            indices, values = doc_vector(tokens, max(totals[space][1] / totals[space][0], 1e-9))
            payload = {"space": space, "length": len(tokens), "terms": bm25.distinct_terms(tokens)}
            points.append(PointData(int(cid), vec.tolist(), indices, values, payload))
        self.engine.upsert(target, points)

    def _set_state(self, target: str, state: IndexState, totals: Totals) -> int:
        """Writes the state with the totals and the point count; returns the count."""
        n = self.engine.count(target)
        meta = {
            "model_id": state.model_id,
            "dim": state.dim,
            "version": state.version,
            "kind": state.kind,
            "created_at": state.created_at,
            "tokenizer": state.tokenizer,
            "spaces": totals,
            "points": n,
        }
        self.engine.set_metadata(target, meta)
        return n
