"""BM25 (sparse) index on tantivy, fed with our own tokens.

Layout of one index directory: a plain tantivy index whose schema has two
fields,

* ``body`` -- text, ``whitespace`` tokenizer, recorded with term frequencies
  (no positions: we never run phrase queries). Documents are the tokens of
  :func:`memory_pipeline.index.tokenizer.tokenize` joined by single spaces;
  tantivy's whitespace tokenizer splits them back without changing them.
  (Measured: building 50k documents of 60 tokens takes ~1.5 s this way and ~9 s
  with ``tantivy.PreTokenizedString``, whose per-token Python objects dominate.)
* ``chunk_id`` -- i64, indexed (delete-by-term, id filters), fast (read ids of
  hits without touching the doc store) and stored.

Scores are tantivy's BM25: ``k1 = 1.2``, ``b = 0.75``, Lucene's idf
``ln(1 + (N - n + 0.5) / (n + 0.5))`` and document lengths quantised to one
byte (exact below 41 tokens). Like Lucene, tantivy counts deleted documents
that have not been merged away yet in ``N``, ``n`` and the average length;
:meth:`SparseIndex.score_external` uses the very same statistics.

Concurrency: one writer per directory (tantivy's lock file; a second one gets
:class:`~memory_pipeline.errors.IndexBusyError`). A reader sees the state
committed when it was opened (or, for the writer itself, at its last
:meth:`SparseIndex.commit`), never a later commit. ``search``/``score_external``
may run concurrently with each other; ``add``/``delete``/``commit`` must be
serialised by the caller. Versions are published side by side with
:meth:`SparseIndex.clone` (hard links), never by writing into a directory that
readers use.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import weakref
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from memory_pipeline.errors import IndexBusyError, IndexUnavailableError, InvalidInputError
from memory_pipeline.index import bm25
from memory_pipeline.index.backends.local.sparse_files import (
    BODY_FIELD,
    ID_FIELD,
    check_schema,
    clone_index,
    read_meta,
    schema,
)
from memory_pipeline.index.bm25 import FIELD_NORMS_TABLE, quantize_length

__all__ = [
    "BM25_B",
    "BM25_K1",
    "FIELD_NORMS_TABLE",
    "WRITER_HEAP_BYTES",
    "SparseIndex",
    "quantize_length",
]

BM25_K1 = bm25.K1
BM25_B = bm25.B

#: Memory budget of the (single-threaded) tantivy writer. When it is full,
#: tantivy writes a segment to disk (not a commit) and goes on.
WRITER_HEAP_BYTES = 64_000_000
WRITER_THREADS = 1

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("busy" in text or "already" in text or "acquire" in text)


#: tantivy's lock files: a copy made to be read leaves them out.
_LOCKS = shutil.ignore_patterns(".tantivy-*.lock")
#: What tantivy says (Rust's io::ErrorKind) when a file cannot be made in the folder.
_CANNOT_WRITE = ("readonlyfilesystem", "permissiondenied", "storagefull", "quotaexceeded")


def _cannot_write_here(exc: BaseException | None) -> bool:
    """The index could not be opened because its folder cannot be written (tantivy's lock
    file): a read-only mount, a folder the user may not write, a full disk."""
    text = str(exc).lower().replace(" ", "").replace("_", "")
    return any(kind in text for kind in _CANNOT_WRITE)


def _find_detail(node: Any, prefix: str) -> float | None:
    """Value of the first node of a tantivy explanation whose description starts with prefix."""
    if isinstance(node, dict):
        if str(node.get("description", "")).startswith(prefix):
            return float(node["value"])
        for child in node.get("details", []) or []:
            found = _find_detail(child, prefix)
            if found is not None:
                return found
    return None


class SparseIndex:
    """A BM25 index of chunks on disk. Build with :meth:`create`, load with :meth:`open`.

    Documents are ``(chunk_id, tokens)`` pairs; ``tokens`` come from
    :func:`~memory_pipeline.index.tokenizer.tokenize` (any strings without
    whitespace work). Changes made with :meth:`add`/:meth:`delete` become visible
    -- to this object too -- only after :meth:`commit`.
    """

    def __init__(self, path: Path, index: tantivy.Index, *, writable: bool) -> None:
        """Private: use :meth:`create` or :meth:`open`."""
        self._path = path
        self._index = index
        self._schema = index.schema
        self._writable = writable
        self._writer: tantivy.IndexWriter | None = None
        # Manual: the snapshot changes only when *we* reload (after our commit),
        # never because another process committed into the same directory.
        self._index.config_reader(reload_policy="Manual")
        self._searcher = self._load_searcher()
        self._stats: tuple[int, float] | None = None  # (N, total tokens) of _searcher
        if writable:
            self._writer = self._new_writer()

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(cls, path: Path) -> SparseIndex:
        """Create a new, empty, writable index in ``path`` (missing or empty directory)."""
        path = Path(path)
        if path.exists():
            if not path.is_dir():
                raise IndexUnavailableError(
                    f"cannot create a sparse index at {path}: it is a file."
                )
            if any(path.iterdir()):
                raise IndexUnavailableError(
                    f"cannot create a sparse index at {path}: the directory is not empty. "
                    "Open it with SparseIndex.open(path, writable=True), or remove it first."
                )
        try:
            path.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(schema(), path=str(path), reuse=False)
        except (OSError, ValueError) as exc:
            raise IndexUnavailableError(f"cannot create a sparse index at {path}: {exc}") from exc
        return cls(path, index, writable=True)

    @classmethod
    def open(cls, path: Path, *, writable: bool = False) -> SparseIndex:
        """Open the index committed in ``path``.

        Raises :class:`~memory_pipeline.errors.IndexUnavailableError` if the directory has no
        index, is corrupt or holds another schema, and
        :class:`~memory_pipeline.errors.IndexBusyError` if ``writable`` and another
        writer holds the lock.
        """
        path = Path(path)
        if not path.is_dir():
            raise IndexUnavailableError(
                f"no sparse index at {path}: the directory does not exist. Build one with "
                "SparseIndex.create() (or check the path / published version)."
            )
        _, meta = read_meta(path)
        check_schema(path, meta)
        try:
            return cls._open(path, path, writable=writable)
        except IndexUnavailableError as exc:
            if writable or not _cannot_write_here(exc.__cause__):
                raise
        # tantivy takes a lock file even to read: on a read-only mount (or where the
        # folder may not be written) a private copy is read instead, removed with it.
        copy = Path(tempfile.mkdtemp(prefix="memory-pipeline-bm25-"))
        try:
            shutil.copytree(path, copy, dirs_exist_ok=True, ignore=_LOCKS)
            opened = cls._open(path, copy, writable=False)
        except (OSError, IndexUnavailableError) as exc:
            shutil.rmtree(copy, ignore_errors=True)
            raise IndexUnavailableError(
                f"sparse index at {path} cannot be read where it is (its folder cannot be "
                f"written) nor copied to {copy.parent} to be read there ({exc})"
            ) from exc
        weakref.finalize(opened, shutil.rmtree, copy, True)
        return opened

    @classmethod
    def _open(cls, path: Path, folder: Path, *, writable: bool) -> SparseIndex:
        """The index committed in ``folder`` (``path``, or a copy of it), named ``path``."""
        try:
            compatible = tantivy.Index.is_compatible(str(folder))
        except (OSError, ValueError) as exc:
            raise IndexUnavailableError(
                f"sparse index at {path} is corrupt or incomplete ({exc}). Rebuild it or "
                "restore the directory from a published copy."
            ) from exc
        if not compatible:
            raise IndexUnavailableError(
                f"sparse index at {path} was written by an incompatible tantivy version; "
                "rebuild it with SparseIndex.create()."
            )
        try:
            index = tantivy.Index.open(str(folder))
            return cls(path, index, writable=writable)
        except IndexUnavailableError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexUnavailableError(
                f"sparse index at {path} is corrupt or incomplete ({exc}). Rebuild it or "
                "restore the directory from a published copy."
            ) from exc

    clone = staticmethod(clone_index)

    def _load_searcher(self) -> tantivy.Searcher:
        self._index.reload()
        searcher = self._index.searcher()
        _ = searcher.num_docs  # fail now, not at the first query
        return searcher

    def _new_writer(self) -> tantivy.IndexWriter:
        try:
            return self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=WRITER_THREADS)
        except (OSError, ValueError, RuntimeError) as exc:
            if _is_lock_error(exc):
                raise IndexBusyError(
                    f"sparse index at {self._path} is locked by another writer ({exc}). "
                    "Wait for it to finish or open the index read-only."
                ) from exc
            raise IndexUnavailableError(
                f"cannot write the sparse index at {self._path}: {exc}"
            ) from exc

    def _require_writer(self) -> tantivy.IndexWriter:
        if not self._writable:
            raise IndexUnavailableError(
                f"sparse index at {self._path} was opened read-only; "
                "use SparseIndex.open(path, writable=True) to change it."
            )
        if self._writer is None:
            self._writer = self._new_writer()
        return self._writer

    def close(self) -> None:
        """Release the writer lock. Uncommitted changes are discarded."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.rollback()
            writer.wait_merging_threads()

    def __enter__(self) -> SparseIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def add(self, items: Iterable[tuple[int, Sequence[str]]]) -> int:
        """Queue ``(chunk_id, tokens)`` documents; returns how many were queued.

        Idempotent per id: each add first deletes the id by term, so re-adding an
        id (in this call, an earlier one, or an earlier commit) replaces the
        document instead of duplicating it. A document with no tokens is kept
        (it counts in :attr:`num_docs` and BM25's ``N``, with length 0).
        Tokens must be non-empty strings without whitespace.
        """
        writer = self._require_writer()
        delete, add_document = writer.delete_documents_by_term, writer.add_document
        Document = tantivy.Document
        count = 0
        for chunk_id, tokens in items:
            cid = _check_id(chunk_id)
            if isinstance(tokens, str):
                raise InvalidInputError(
                    f"chunk {cid}: tokens must be a sequence of strings, got one str "
                    "(did you forget tokenize()?)."
                )
            text = " ".join(tokens)
            if len(text.split()) != len(tokens):
                raise InvalidInputError(
                    f"chunk {cid}: tokens must be non-empty and contain no whitespace "
                    "(use memory_pipeline.index.tokenizer.tokenize)."
                )
            delete(ID_FIELD, cid)
            doc = Document()
            doc.add_integer(ID_FIELD, cid)
            doc.add_text(BODY_FIELD, text)
            add_document(doc)
            count += 1
        return count

    def delete(self, ids: Iterable[int]) -> int:
        """Queue deletion of chunk ids; returns the number of distinct ids queued.

        Ids that are not in the index are ignored.
        """
        writer = self._require_writer()
        distinct = {_check_id(i) for i in ids}
        for cid in distinct:
            writer.delete_documents_by_term(ID_FIELD, cid)
        return len(distinct)

    def commit(self) -> None:
        """Commit queued changes (one tantivy commit), wait for merges, reload.

        When this returns, the directory holds only final files (no merge in
        flight: safe to :meth:`clone`) and this object's searches see the new
        state. The writer lock is taken again for further changes.
        """
        writer = self._require_writer()
        try:
            writer.commit()
        except (OSError, ValueError, RuntimeError) as exc:
            raise IndexUnavailableError(
                f"commit to the sparse index at {self._path} failed: {exc}"
            ) from exc
        finally:
            # Consumes the writer (and releases its lock) once merges are done.
            self._writer = None
            writer.wait_merging_threads()
        self._searcher = self._load_searcher()
        self._stats = None
        with contextlib.suppress(IndexBusyError):
            # Keep the lock; if someone else grabbed it, the next add() says so.
            self._writer = self._new_writer()

    # ------------------------------------------------------------------ reading

    @property
    def path(self) -> Path:
        return self._path

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def num_docs(self) -> int:
        """Number of live (committed, not deleted) documents."""
        return int(self._searcher.num_docs)

    def ids(self) -> np.ndarray:
        """All live chunk ids, ``int64``, sorted ascending."""
        searcher = self._searcher
        n = searcher.num_docs
        if n == 0:
            return np.empty(0, dtype=np.int64)
        hits = searcher.search(
            tantivy.Query.all_query(),
            n,
            count=False,
            order_by_field=ID_FIELD,
            order=tantivy.Order.Asc,
        ).hits
        out = np.fromiter((h[0] for h in hits), dtype=np.int64, count=len(hits))
        out.sort()
        return out

    def _term_query(self, token: str) -> tantivy.Query:
        return tantivy.Query.term_query(self._schema, BODY_FIELD, token, index_option="freq")

    def _bm25_query(self, terms: Sequence[str]) -> tantivy.Query:
        if len(terms) == 1:
            return self._term_query(terms[0])
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, self._term_query(t)) for t in terms]
        )

    def search(
        self,
        query_tokens: Sequence[str],
        top_n: int,
        *,
        allowed_ids: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 top ``top_n`` as ``(chunk_id, score)``, best first.

        The query is the OR of the distinct tokens; a token unknown to the index
        contributes nothing. ``allowed_ids`` restricts the candidates *before*
        the top-n cut (a conjunction with a zero-scoring id filter), so scores
        are the unfiltered ones; its cost grows with its size (a few ms per 10k
        ids at 100k documents). Equal scores are ordered by chunk id (which of
        several documents tied at the cut makes it in is tantivy's choice).
        """
        terms = bm25.distinct_terms(query_tokens)
        if not terms or top_n <= 0:
            return []
        searcher = self._searcher
        limit = min(top_n, searcher.num_docs)
        if limit == 0:
            return []
        query = self._bm25_query(terms)
        if allowed_ids is not None:
            if isinstance(allowed_ids, np.ndarray):
                allowed = allowed_ids.astype(np.int64, copy=False).tolist()
            else:
                allowed = [i if type(i) is int else _check_id(i) for i in allowed_ids]
            if not allowed:
                return []
            id_filter = tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(self._schema, ID_FIELD, allowed), 0.0
            )
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query), (tantivy.Occur.Must, id_filter)]
            )
        hits = searcher.search(query, limit, count=False).hits
        if not hits:
            return []
        ids = searcher.fast_field_values(ID_FIELD, [h[1] for h in hits])
        out = [(int(i), float(h[0])) for i, h in zip(ids, hits, strict=True) if i is not None]
        out.sort(key=lambda x: (-x[1], x[0]))
        return out

    def scores_for(
        self, query_tokens: Sequence[str], ids: Sequence[int]
    ) -> list[tuple[int, float]]:
        """BM25 scores of the given indexed chunks, as :meth:`search` would give them.

        For a few ids (the other retriever's candidates): the ids drive the query and
        the terms only add their scores, so the cost follows the number of ids, not
        the number of documents matching the terms. Ids without any query term (or
        not in the index) are left out.
        """
        terms = bm25.distinct_terms(query_tokens)
        wanted = [i if type(i) is int else _check_id(i) for i in ids]
        if not terms or not wanted:
            return []
        by_id = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, ID_FIELD, i))
                for i in wanted
            ]
        )
        query = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.const_score_query(by_id, 0.0)),
                *((tantivy.Occur.Should, self._term_query(t)) for t in terms),
            ]
        )
        searcher = self._searcher
        hits = searcher.search(query, len(wanted), count=False).hits
        if not hits:
            return []
        found = searcher.fast_field_values(ID_FIELD, [h[1] for h in hits])
        return [
            (int(i), float(h[0]))
            for i, h in zip(found, hits, strict=True)
            if i is not None and h[0] > 0
        ]

    def doc_freq(self, term: str) -> int:
        """Documents of this snapshot holding ``term`` (deleted, unmerged ones included)."""
        return int(self._searcher.doc_freq(BODY_FIELD, term)) if self.num_docs else 0

    def collection_stats(self, terms: Sequence[str]) -> tuple[int, float]:
        """``(N, total tokens)`` as this index's BM25 uses them (see ``score_external``)."""
        return self._global_stats(terms)

    def _global_stats(self, terms: Sequence[str]) -> tuple[int, float]:
        """``(N, total tokens)`` exactly as tantivy's BM25 uses them for this snapshot.

        tantivy does not expose the field's token total directly, but its score
        explanation reports ``N`` and ``avgdl``: explain one matching document
        (preferably for a query term, else for the most frequent term).
        Cached until the next commit.
        """
        if self._stats is not None:
            return self._stats
        searcher = self._searcher
        if searcher.num_docs == 0:
            return (0, 0.0)

        def candidates() -> Iterator[str]:
            yield from (t for t in terms if searcher.doc_freq(BODY_FIELD, t) > 0)
            yield from (t for t, _ in searcher.terms_with_prefix(BODY_FIELD, "", limit=16))

        for term in candidates():
            query = self._term_query(term)
            hits = searcher.search(query, 1, count=False).hits
            if not hits:
                continue  # every document with this term is deleted
            explanation = json.loads(query.explain(searcher, hits[0][1]).to_json())
            n_docs = _find_detail(explanation, "N,")
            avgdl = _find_detail(explanation, "avgdl")
            if n_docs is None or avgdl is None:
                raise IndexUnavailableError(
                    "unexpected tantivy score explanation (no 'N' / 'avgdl'); "
                    "SparseIndex.score_external needs the pinned tantivy version."
                )
            self._stats = (int(n_docs), avgdl * n_docs)
            return self._stats
        # Live documents but no terms: all of them are empty.
        self._stats = (int(searcher.num_docs), 0.0)
        return self._stats

    def score_external(
        self,
        query_tokens: Sequence[str],
        docs: Sequence[tuple[int, Sequence[str]]],
    ) -> list[tuple[int, float]]:
        """BM25 scores of documents that are not in the index, comparable with :meth:`search`.

        For freshly ingested chunks that must be searchable before the next index
        update. Statistics are this index's, *extended by ``docs`` as if they had
        been added*: ``N = N_index + len(docs)``, ``n(t) = n_index(t) + number of
        docs containing t``, and the average length includes their tokens. So a
        document scores exactly (up to float32 rounding in tantivy) what
        :meth:`search` would give it after ``add(docs)`` + ``commit()``; scores of
        the already indexed documents shift by the same small amount then.
        Lengths are quantised like tantivy's. Returns ``(chunk_id, score)`` sorted
        by score (then id), without zero scores.
        """
        return bm25.score_external(query_tokens, docs, self._index_stats)

    def _index_stats(self, terms: Sequence[str]) -> bm25.IndexStats:
        n_index, tokens_index = self._global_stats(terms)
        searcher = self._searcher
        return bm25.IndexStats(
            n_index, tokens_index, lambda t: searcher.doc_freq(BODY_FIELD, t) if n_index else 0
        )


def _check_id(chunk_id: Any) -> int:
    if isinstance(chunk_id, bool) or not isinstance(chunk_id, (int, np.integer)):
        raise InvalidInputError(f"chunk id must be an int, got {chunk_id!r}.")
    cid = int(chunk_id)
    if not _I64_MIN <= cid <= _I64_MAX:
        raise InvalidInputError(f"chunk id {cid} does not fit in a signed 64-bit integer.")
    return cid
