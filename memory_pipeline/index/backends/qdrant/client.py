"""The engine behind ``qdrant-client``: a server's, or local mode's (one per folder,
shared in a process)."""

from __future__ import annotations

import atexit
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index.backends.qdrant.engine import (
    DENSE,
    PAGE,
    SPARSE,
    Held,
    PointData,
    Ranked,
    Where,
    ranked,
)
from memory_pipeline.index.versions import dir_size

# Local mode locks its folder: every memory of this process on one folder shares a
# client, which the last of them to close releases (folder -> [client, memories open]).
_LOCAL: dict[str, list[Any]] = {}


@atexit.register
def _close_local() -> None:
    """Release local mode's folders before the interpreter tears its modules down."""
    for client, _ in list(_LOCAL.values()):
        client.close()
    _LOCAL.clear()


def _release(client: QdrantClient) -> None:
    """One memory is done with ``client``: a server's closes, local mode's once unused."""
    for key, held in list(_LOCAL.items()):
        if held[0] is client:
            held[1] -= 1
            if held[1] <= 0:
                del _LOCAL[key]
                client.close()
            return
    client.close()


def _local_client(path: Path) -> QdrantClient:
    key = str(path.resolve())
    held = _LOCAL.get(key)
    if held is not None:
        held[1] += 1
        return held[0]  # type: ignore[no-any-return]
    path.mkdir(parents=True, exist_ok=True)
    try:
        client = QdrantClient(path=key)
    except RuntimeError as exc:
        raise IndexUnavailableError(
            f"{exc} Set HYBRID_RAG_QDRANT_URL to a Qdrant server to share the index "
            "between processes"
        ) from exc
    _LOCAL[key] = [client, 1]
    return client


def _server_client(url: str, api_key: str | None) -> QdrantClient:
    client = QdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    try:
        client.get_collections()
    except (ResponseHandlingException, UnexpectedResponse, OSError) as exc:
        raise IndexUnavailableError(
            f"the Qdrant server at {url} did not answer ({exc}); start it, check "
            "HYBRID_RAG_QDRANT_URL and HYBRID_RAG_QDRANT_API_KEY, or use "
            "HYBRID_RAG_INDEX_BACKEND=local"
        ) from exc
    return client


def _filter(where: Where | None) -> models.Filter | None:
    if where is None:
        return None
    must: list[Any] = []
    if where.has_sparse:
        must.append(models.HasVectorCondition(has_vector=SPARSE))
    if where.spaces is not None:
        must.append(_in_spaces(where.spaces))
    if where.ids is not None:
        must.append(models.HasIdCondition(has_id=sorted(int(i) for i in where.ids)))
    if where.term is not None:
        must.append(models.FieldCondition(key="terms", match=models.MatchValue(value=where.term)))
    return models.Filter(must=must) if must else None


def _in_spaces(spaces: Collection[str]) -> models.FieldCondition:
    return models.FieldCondition(key="space", match=models.MatchAny(any=sorted(spaces)))


class ClientEngine:
    """A Qdrant server (``url``), or qdrant-client's local mode in ``folder``: pure
    Python, every search exact, sparse vectors scored point by point (seconds per
    query past ~20k points)."""

    def __init__(self, url: str | None, api_key: str | None, folder: Path | None):
        if url is None:
            assert folder is not None, "local mode needs a folder"
            self.client = _local_client(folder)
        else:
            self.client = _server_client(url, api_key)
        self.indexed = url is not None
        self.folder = folder if url is None else None

    def target(self, alias: str) -> str | None:
        for a in self.client.get_aliases().aliases:
            if a.alias_name == alias:
                return a.collection_name
        if self.client.collection_exists(alias):
            raise IndexUnavailableError(
                f"Qdrant holds a collection named {alias!r} that this memory did not make; "
                "choose another HYBRID_RAG_INDEX_COLLECTION or remove that collection"
            )
        return None

    def exists(self, name: str) -> bool:
        return bool(self.client.collection_exists(name))

    def create(self, name: str, dim: int) -> None:
        self.client.create_collection(
            name,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.DOT)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if self.indexed:
            for key in ("space", "terms"):
                self.client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD)

    def drop(self, name: str) -> None:
        self.client.delete_collection(name)

    def point_alias(self, alias: str, name: str) -> None:
        ops: list[Any] = []
        if any(a.alias_name == alias for a in self.client.get_aliases().aliases):
            ops.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
            )
        ops.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=name, alias_name=alias)
            )
        )
        self.client.update_collection_aliases(change_aliases_operations=ops)

    def metadata(self, name: str) -> dict[str, Any]:
        return dict(self.client.get_collection(name).config.metadata or {})

    def set_metadata(self, name: str, meta: dict[str, Any]) -> None:
        self.client.update_collection(name, metadata=meta)

    def upsert(self, name: str, points: Sequence[PointData]) -> None:
        structs = [
            models.PointStruct(
                id=p.id,
                vector={
                    DENSE: p.dense,
                    SPARSE: models.SparseVector(indices=p.sparse_indices, values=p.sparse_values),
                },
                payload=p.payload,
            )
            for p in points
        ]
        self.client.upsert(name, structs, wait=True)

    def delete(self, name: str, ids: Sequence[int]) -> None:
        self.client.delete(name, models.PointIdsList(points=list(ids)), wait=True)

    def retrieve(
        self, name: str, ids: Sequence[int], *, payload: Sequence[str], dense: bool
    ) -> list[Held]:
        points = self.client.retrieve(
            name,
            list(ids),
            with_payload=list(payload) if payload else False,
            with_vectors=[DENSE] if dense else False,
        )
        out = []
        for p in points:
            vectors = p.vector if isinstance(p.vector, dict) else {}
            vector = vectors.get(DENSE) if dense else None
            out.append(Held(int(p.id), dict(p.payload or {}), vector))  # type: ignore[arg-type]
        return out

    def count(self, name: str, where: Where | None = None) -> int:
        return int(self.client.count(name, count_filter=_filter(where), exact=True).count)

    def scroll_ids(self, name: str, where: Where | None = None) -> np.ndarray:
        ids: list[int] = []
        offset: Any = None
        while True:
            points, offset = self.client.scroll(
                name, scroll_filter=_filter(where), limit=PAGE, offset=offset, with_payload=False
            )
            ids.extend(int(p.id) for p in points)
            if offset is None:
                break
        return np.asarray(sorted(ids), dtype=np.int64)

    def search_dense(
        self, name: str, vector: np.ndarray, limit: int, where: Where | None, *, exact: bool
    ) -> Ranked:
        found = self.client.query_points(
            name,
            query=vector.astype(np.float32).tolist(),
            using=DENSE,
            limit=limit,
            query_filter=_filter(where),
            search_params=models.SearchParams(exact=True) if exact else None,
        ).points
        return ranked([(int(p.id), p.score) for p in found])

    def search_sparse(
        self,
        name: str,
        indices: list[int],
        values: list[float],
        limit: int,
        where: Where | None,
        idf_over: Collection[str] | None,
    ) -> Ranked:
        params = None
        if idf_over is not None:
            corpus = models.Filter(must=[_in_spaces(idf_over)])
            params = models.SearchParams(idf=models.IdfCorpusParams(corpus=corpus))
        found = self.client.query_points(
            name,
            query=models.SparseVector(indices=indices, values=values),
            using=SPARSE,
            limit=limit,
            query_filter=_filter(where),
            search_params=params,
        ).points
        return ranked([(int(p.id), p.score) for p in found])

    def size_bytes(self) -> int | None:
        return dir_size(self.folder) if self.folder is not None else None

    def close(self) -> None:
        _release(self.client)
