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

import atexit
import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_pipeline.errors import IndexError_
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.queued import Batch, IndexState, QueuedIndex
from memory_pipeline.index.versions import Manifest, dir_size

if TYPE_CHECKING:
    from memory_pipeline.config import Settings
    from memory_pipeline.store import Store

Ranked = list[tuple[int, float]]
Totals = dict[str, list[int]]  # space -> [documents, tokens]
DENSE, SPARSE = "dense", "bm25"
_PAGE = 1_000
# Local mode locks its folder: every memory of this process on one folder shares a
# client, which the last of them to close releases (folder -> [client, memories open]).
_LOCAL: dict[str, list[Any]] = {}


def open_qdrant(settings: Settings, store: Store, model_id: str) -> QueuedIndex:
    """The backend over the server ``qdrant_url``, or else over local mode's folder."""
    index = settings.index
    folder = None if index.qdrant_url else index.qdrant_path or settings.index_path / "qdrant"
    client = connect(index.qdrant_url, index.qdrant_api_key, folder)
    service = QdrantService(
        client, index.collection, remote=index.qdrant_url is not None, folder=folder
    )
    return QueuedIndex("qdrant", store, model_id, service, settings.index_path)


@atexit.register
def _close_local() -> None:
    """Release local mode's folders before the interpreter tears its modules down."""
    for client, _ in list(_LOCAL.values()):
        client.close()
    _LOCAL.clear()


def release(client: QdrantClient) -> None:
    """One memory is done with ``client``: a server's closes, local mode's once unused."""
    for key, held in list(_LOCAL.items()):
        if held[0] is client:
            held[1] -= 1
            if held[1] <= 0:
                del _LOCAL[key]
                client.close()
            return
    client.close()


def connect(url: str | None, api_key: str | None, path: Path | None) -> QdrantClient:
    """A client of the server at ``url``, or else of local mode in ``path``."""
    if url is None:
        assert path is not None, "local mode needs a folder"
        key = str(path.resolve())
        held = _LOCAL.get(key)
        if held is not None:
            held[1] += 1
            return held[0]
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = QdrantClient(path=key)
        except RuntimeError as exc:
            raise IndexError_(
                f"{exc} Set HYBRID_RAG_QDRANT_URL to a Qdrant server to share the index "
                "between processes"
            ) from exc
        _LOCAL[key] = [client, 1]
        return client
    client = QdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    try:
        client.get_collections()
    except (ResponseHandlingException, UnexpectedResponse, OSError) as exc:
        raise IndexError_(
            f"the Qdrant server at {url} did not answer ({exc}); start it, check "
            "HYBRID_RAG_QDRANT_URL and HYBRID_RAG_QDRANT_API_KEY, or use "
            "HYBRID_RAG_INDEX_BACKEND=local"
        ) from exc
    return client


def term_index(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")


def _terms(tokens: Sequence[str]) -> list[str]:
    return [t for t in dict.fromkeys(tokens) if t]


def _query_vector(terms: Sequence[str]) -> models.SparseVector:
    weights: Counter[int] = Counter(term_index(t) for t in terms)
    return models.SparseVector(indices=list(weights), values=[float(v) for v in weights.values()])


def _doc_vector(tokens: Sequence[str], avgdl: float) -> models.SparseVector:
    norm = bm25.K1 * (1.0 - bm25.B + bm25.B * bm25.quantize_length(len(tokens)) / avgdl)
    weights: dict[int, float] = {}
    for term, tf in Counter(tokens).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + (1.0 + bm25.K1) * tf / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def _in_spaces(spaces: Collection[str]) -> models.FieldCondition:
    return models.FieldCondition(key="space", match=models.MatchAny(any=sorted(spaces)))


def _ranked(points: Iterable[models.ScoredPoint]) -> Ranked:
    out = [(int(p.id), float(p.score)) for p in points if p.score > 0.0]
    out.sort(key=lambda p: (-p[1], p[0]))
    return out


@dataclass(frozen=True)
class QdrantDense:
    client: QdrantClient
    collection: str
    remote: bool

    def search(self, query: np.ndarray, top_n: int, *, allowed: np.ndarray | None = None) -> Ranked:
        if top_n <= 0 or (allowed is not None and not len(allowed)):
            return []
        where = None
        if allowed is not None:
            where = models.Filter(must=[models.HasIdCondition(has_id=allowed.tolist())])
        found = self.client.query_points(
            self.collection,
            query=query.astype(np.float32).tolist(),
            using=DENSE,
            limit=top_n,
            query_filter=where,
            search_params=models.SearchParams(exact=True) if where and self.remote else None,
        ).points
        out = [(int(p.id), float(p.score)) for p in found]
        out.sort(key=lambda p: (-p[1], p[0]))
        return out

    def scores_for(self, query: np.ndarray, ids: np.ndarray) -> tuple[Ranked, np.ndarray]:
        if not len(ids):
            return [], np.zeros(0, dtype=np.int64)
        points = self.client.retrieve(self.collection, ids.tolist(), with_vectors=[DENSE])
        if not points:
            return [], np.asarray(ids, dtype=np.int64)
        held = np.asarray([int(p.id) for p in points], dtype=np.int64)
        vecs = np.asarray([_dense_of(p) for p in points], dtype=np.float32)
        scores = vecs @ query.astype(np.float32)
        found = [(int(i), float(s)) for i, s in zip(held, scores, strict=True)]
        return found, np.setdiff1d(np.asarray(ids, dtype=np.int64), held)

    def member_ids(self) -> np.ndarray:
        return _scroll_ids(self.client, self.collection, None)


@dataclass(frozen=True)
class QdrantSparse:
    client: QdrantClient
    collection: str
    remote: bool
    totals: Totals  # of the spaces it reads
    spaces: frozenset[str] | None  # None: every space

    @property
    def num_docs(self) -> int:
        return sum(n for n, _ in self.totals.values())

    def ids(self) -> np.ndarray:
        where: list[Any] = [models.HasVectorCondition(has_vector=SPARSE)]
        if self.spaces is not None:
            where.append(_in_spaces(self.spaces))
        return _scroll_ids(self.client, self.collection, models.Filter(must=where))

    def search(
        self, query_tokens: Sequence[str], top_n: int, *, allowed_ids: Collection[int] | None = None
    ) -> Ranked:
        terms = _terms(query_tokens)
        if not terms or top_n <= 0 or (allowed_ids is not None and not allowed_ids):
            return []
        return self._search(terms, top_n, allowed_ids)

    def scores_for(self, query_tokens: Sequence[str], ids: Sequence[int]) -> Ranked:
        terms = _terms(query_tokens)
        if not terms or not len(ids):
            return []
        return self._search(terms, len(ids), [int(i) for i in ids])

    def _search(self, terms: list[str], top_n: int, ids: Collection[int] | None) -> Ranked:
        must: list[Any] = []
        if self.spaces is not None:
            must.append(_in_spaces(self.spaces))
        if ids is not None:
            must.append(models.HasIdCondition(has_id=sorted(int(i) for i in ids)))
        found = self.client.query_points(
            self.collection,
            query=_query_vector(terms),
            using=SPARSE,
            limit=top_n,
            query_filter=models.Filter(must=must) if must else None,
            search_params=self._idf_scope(),
        ).points
        return _ranked(found)

    def _idf_scope(self) -> models.SearchParams | None:
        # Local mode's collection-wide idf is over live points already; a server's counts
        # deleted points until they are optimised away, so it gets the corpus spelled out.
        if self.spaces is None and not self.remote:
            return None
        corpus = models.Filter(must=[_in_spaces(self.spaces or self.totals)])
        return models.SearchParams(idf=models.IdfCorpusParams(corpus=corpus))

    def score_external(
        self, query_tokens: Sequence[str], docs: Sequence[tuple[int, Sequence[str]]]
    ) -> Ranked:
        terms = _terms(query_tokens)
        if not terms or not docs:
            return []
        space = [_in_spaces(self.spaces)] if self.spaces is not None else []
        df = {
            t: self.client.count(
                self.collection,
                count_filter=models.Filter(
                    must=[
                        *space,
                        models.FieldCondition(key="terms", match=models.MatchValue(value=t)),
                    ]
                ),
                exact=True,
            ).count
            for t in terms
        }
        return bm25.score_documents(
            terms,
            docs,
            n_index=self.num_docs,
            tokens_index=float(sum(t for _, t in self.totals.values())),
            doc_freq_index=lambda t: df.get(t, 0),
        )


def _dense_of(point: models.Record) -> list[float]:
    vectors = point.vector
    if not isinstance(vectors, dict):
        raise IndexError_(
            f"Qdrant point {point.id} has no named vector {DENSE!r}; run rebuild-index"
        )
    return vectors[DENSE]  # type: ignore[return-value]


def _scroll_ids(client: QdrantClient, collection: str, where: models.Filter | None) -> np.ndarray:
    ids: list[int] = []
    offset: Any = None
    while True:
        points, offset = client.scroll(
            collection, scroll_filter=where, limit=_PAGE, offset=offset, with_payload=False
        )
        ids.extend(int(p.id) for p in points)
        if offset is None:
            break
    return np.asarray(sorted(ids), dtype=np.int64)


@dataclass
class QdrantView:
    """The collection as one search sees it."""

    manifest: Manifest
    client: QdrantClient
    collection: str
    remote: bool
    totals: Totals
    folder: Path | None  # local mode's folder
    spaces: frozenset[str] | None = None

    @property
    def dense(self) -> QdrantDense:
        return QdrantDense(self.client, self.collection, self.remote)

    @property
    def sparse(self) -> QdrantSparse:
        totals = {s: t for s, t in self.totals.items() if self.spaces is None or s in self.spaces}
        return QdrantSparse(self.client, self.collection, self.remote, totals, self.spaces)

    def for_spaces(self, read: Collection[str] | None) -> QdrantView:
        if read is None or set(self.totals) <= set(read):
            return replace(self, spaces=None)
        return replace(self, spaces=frozenset(read))

    def member_ids(self) -> np.ndarray:
        return self.dense.member_ids()

    def stored_sparse_ids(self) -> np.ndarray:
        return replace(self, spaces=None).sparse.ids()

    def size_bytes(self) -> int:
        if self.folder is not None:
            return dir_size(self.folder)
        # A server does not report bytes per collection: vectors and weights, estimated.
        return self.manifest.n_dense * (4 * self.manifest.dim + 512)


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
            raise IndexError_(
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
            raise IndexError_(
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
            raise IndexError_(f"the Qdrant alias {self.alias!r} is gone; run rebuild-index")
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
        for start in range(0, len(ids), _PAGE):
            part = ids[start : start + _PAGE]
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
                    SPARSE: _doc_vector(tokens, max(totals[space][1] / totals[space][0], 1e-9)),
                },
                payload={"space": space, "length": len(tokens), "terms": _terms(tokens)},
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
