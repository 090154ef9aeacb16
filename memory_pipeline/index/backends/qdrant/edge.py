"""The engine of Qdrant Edge (``qdrant-edge-py``): Qdrant's own Rust engine in-process.

Edge holds one shard per folder and knows nothing of collections, aliases or
collection metadata; this module keeps them in its folder:

* ``collections/<name>/shard``: the shard (Qdrant's segments and write-ahead log);
* ``collections/<name>/metadata.json``: the collection's metadata;
* ``aliases.json``: alias -> collection, replaced in one rename, so an alias moves at
  once and a crash leaves it where it was.

A write is held once ``update`` returns (it is in the write-ahead log, which Edge
replays on the next load); after each batch of writes ``optimize`` lets Edge build its
indexes (HNSW for the dense vectors of a large enough segment, the sparse inverted
index) and vacuum deleted points. One process at a time per folder (a lock file); the
memories of that process on one folder share the shards.

A point's ``terms`` (its distinct tokens) are one whitespace-joined string under a text
index that splits on whitespace and changes nothing else (tokens hold no whitespace), so
``MatchText`` of one token counts the points holding it, as a keyword list would: Edge
converts a Python list into its payload at ~5 µs a string, most of a build's write time
(a chunk has ~70 distinct terms), and one string at once. Collections made before keep
their keyword list, read and written as such. No payload index builds HNSW links per
value (``enable_hnsw=False``): dense searches filter on ids only, and exactly, so those
links would cost build time and serve nothing.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import shutil
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from memory_pipeline.durable import replace_text
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

# folder -> [its EdgeFolder, memories open]
_OPEN: dict[str, list[Any]] = {}


@atexit.register
def _close_all() -> None:
    for folder, _ in list(_OPEN.values()):
        folder.close()
    _OPEN.clear()


class EdgeFolder:
    """The collections of one folder, and the lock that keeps other processes out."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self._lock = (path / ".lock").open("a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock.close()
            raise IndexUnavailableError(
                f"the Qdrant Edge folder {path} is open in another process (one process "
                "at a time); set HYBRID_RAG_QDRANT_URL to a Qdrant server to share the "
                "index between processes"
            ) from exc
        self.shards: dict[str, qe.EdgeShard] = {}
        self.text_terms: dict[str, bool] = {}  # collection -> its terms are one text field
        # Read once: only this process, holding the lock, moves an alias (point_alias).
        path = self.path / "aliases.json"
        self._aliases: dict[str, str] = dict(json.loads(path.read_text())) if path.exists() else {}

    def alias(self, name: str) -> str | None:
        """The collection the alias ``name`` points at (None: no such alias)."""
        return self._aliases.get(name)

    def point_alias(self, alias: str, name: str) -> None:
        aliases = {**self._aliases, alias: name}
        replace_text(self.path / "aliases.json", json.dumps(aliases))
        self._aliases = aliases

    def collection(self, name: str) -> Path:
        return self.path / "collections" / name

    def shard(self, name: str) -> qe.EdgeShard:
        """The shard of the collection ``name``, or of the one the alias ``name`` names."""
        name = self.alias(name) or name
        shard = self.shards.get(name)
        if shard is None:
            folder = self.collection(name) / "shard"
            if not folder.is_dir():
                raise IndexUnavailableError(
                    f"the Qdrant Edge collection {name!r} is missing from {self.path}; "
                    "run rebuild-index"
                )
            try:
                shard = qe.EdgeShard.load(str(folder))
            except Exception as exc:  # Edge raises plain Exception
                raise IndexUnavailableError(
                    f"Qdrant Edge could not open {folder}: {exc}; run rebuild-index"
                ) from exc
            self.shards[name] = shard
        return shard

    def terms_as_text(self, name: str) -> bool:
        """Whether the collection ``name`` (or the alias's) keeps terms as one text field."""
        name = self.alias(name) or name
        found = self.text_terms.get(name)
        if found is None:
            schema = self.shard(name).info().payload_schema.get("terms")
            found = schema is not None and schema.data_type == qe.PayloadSchemaType.Text
            self.text_terms[name] = found
        return found

    def forget(self, name: str) -> None:
        shard = self.shards.pop(name, None)
        if shard is not None:
            shard.close()
        self.text_terms.pop(name, None)

    def close(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()
        self.text_terms.clear()
        self._lock.close()


def _open_folder(path: Path) -> EdgeFolder:
    key = str(path.resolve())
    held = _OPEN.get(key)
    if held is not None:
        held[1] += 1
        return held[0]  # type: ignore[no-any-return]
    folder = EdgeFolder(Path(key))
    _OPEN[key] = [folder, 1]
    return folder


def _release(folder: EdgeFolder) -> None:
    for key, held in list(_OPEN.items()):
        if held[0] is folder:
            held[1] -= 1
            if held[1] <= 0:
                del _OPEN[key]
                folder.close()
            return


def _filter(where: Where | None, text_terms: bool) -> qe.Filter | None:
    if where is None:
        return None
    must: list[Any] = []
    if where.has_sparse:
        must.append(qe.HasVectorCondition(vector=SPARSE))
    if where.spaces is not None:
        must.append(_in_spaces(where.spaces))
    if where.ids is not None:
        must.append(qe.HasIdCondition(point_ids={int(i) for i in where.ids}))
    if where.term is not None:
        match = qe.MatchText(text=where.term) if text_terms else qe.MatchValue(value=where.term)
        must.append(qe.FieldCondition(key="terms", match=match))
    return qe.Filter(must=must) if must else None


# A chunk's distinct tokens, whitespace-joined: split on whitespace and nothing else.
TERMS_INDEX = qe.TextIndexParams(
    tokenizer=qe.TokenizerType.Whitespace,
    lowercase=False,
    ascii_folding=False,
    phrase_matching=False,
    enable_hnsw=False,
)


def _in_spaces(spaces: Collection[str]) -> qe.FieldCondition:
    return qe.FieldCondition(key="space", match=qe.MatchAny(any=sorted(spaces)))


def _disk_bytes(path: Path) -> int:
    # Blocks in use: Edge's write-ahead log files are sparse, 32 MiB apiece on paper.
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


class EdgeEngine:
    """Qdrant Edge in ``folder``: HNSW and the sparse inverted index as on a server.
    Points are read and written through a collection's name or an alias of it."""

    indexed = True

    def __init__(self, folder: Path):
        self.folder = _open_folder(folder)

    # -- collections and aliases ------------------------------------------------

    def target(self, alias: str) -> str | None:
        found = self.folder.alias(alias)
        if found is None and self.exists(alias):
            raise IndexUnavailableError(
                f"{self.folder.path} holds a collection named {alias!r} that this memory did "
                "not make; choose another HYBRID_RAG_INDEX_COLLECTION or remove it"
            )
        return found

    def exists(self, name: str) -> bool:
        return (self.folder.collection(name) / "shard").is_dir()

    def create(self, name: str, dim: int) -> None:
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Dot)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        folder = self.folder.collection(name)
        folder.mkdir(parents=True)
        shard = qe.EdgeShard.create(str(folder / "shard"), config)
        space = qe.KeywordIndexParams(enable_hnsw=False)
        shard.update(qe.UpdateOperation.create_field_index("space", space))
        shard.update(qe.UpdateOperation.create_field_index("terms", TERMS_INDEX))
        self.folder.shards[name] = shard
        self.folder.text_terms[name] = True

    def drop(self, name: str) -> None:
        self.folder.forget(name)
        shutil.rmtree(self.folder.collection(name), ignore_errors=True)

    def point_alias(self, alias: str, name: str) -> None:
        self.folder.point_alias(alias, name)

    def metadata(self, name: str) -> dict[str, Any]:
        path = self.folder.collection(name) / "metadata.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def set_metadata(self, name: str, meta: dict[str, Any]) -> None:
        shard = self.folder.shard(name)
        shard.optimize()  # the writes before it, indexed (Edge has no background optimiser)
        replace_text(self.folder.collection(name) / "metadata.json", json.dumps(meta))

    # -- points -----------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[PointData]) -> None:
        text = self.folder.terms_as_text(name)
        structs = [
            qe.Point(
                p.id,
                {DENSE: p.dense, SPARSE: qe.SparseVector(p.sparse_indices, p.sparse_values)},
                {**p.payload, "terms": " ".join(p.payload["terms"])}
                if text and "terms" in p.payload
                else p.payload,
            )
            for p in points
        ]
        self.folder.shard(name).update(qe.UpdateOperation.upsert_points(structs))

    def delete(self, name: str, ids: Sequence[int]) -> None:
        self.folder.shard(name).update(qe.UpdateOperation.delete_points([int(i) for i in ids]))

    def retrieve(
        self, name: str, ids: Sequence[int], *, payload: Sequence[str], dense: bool
    ) -> list[Held]:
        records = self.folder.shard(name).retrieve(
            [int(i) for i in ids],
            with_payload=list(payload) if payload else False,
            with_vector=[DENSE] if dense else False,
        )
        out = []
        for r in records:
            vectors = r.vector if isinstance(r.vector, dict) else {}
            vector = vectors.get(DENSE) if dense else None
            out.append(Held(int(r.id), dict(r.payload or {}), vector))  # type: ignore[arg-type]
        return out

    def count(self, name: str, where: Where | None = None) -> int:
        return self.folder.shard(name).count(
            qe.CountRequest(exact=True, filter=self._filter(name, where))
        )

    def scroll_ids(self, name: str, where: Where | None = None) -> np.ndarray:
        shard = self.folder.shard(name)
        ids: list[int] = []
        offset: Any = None
        while True:
            records, offset = shard.scroll(
                qe.ScrollRequest(offset=offset, limit=PAGE, filter=self._filter(name, where))
            )
            ids.extend(int(r.id) for r in records)
            if offset is None:
                break
        return np.asarray(sorted(ids), dtype=np.int64)

    # -- searches ---------------------------------------------------------------

    def search_dense(
        self, name: str, vector: np.ndarray, limit: int, where: Where | None, *, exact: bool
    ) -> Ranked:
        found = self.folder.shard(name).query(
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(vector.astype(np.float32).tolist(), using=DENSE),
                filter=self._filter(name, where),
                params=qe.SearchParams(exact=True) if exact else None,
            )
        )
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
            params = qe.SearchParams(
                idf=qe.IdfParams(corpus=qe.Filter(must=[_in_spaces(idf_over)]))
            )
        found = self.folder.shard(name).query(
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(qe.SparseVector(indices, values), using=SPARSE),
                filter=self._filter(name, where),
                params=params,
            )
        )
        return ranked([(int(p.id), p.score) for p in found])

    def _filter(self, name: str, where: Where | None) -> qe.Filter | None:
        text = where is not None and where.term is not None and self.folder.terms_as_text(name)
        return _filter(where, text)

    def size_bytes(self) -> int | None:
        return _disk_bytes(self.folder.path)

    def close(self) -> None:
        _release(self.folder)
