"""BEIR-layout data sets: loading, and a throw-away memory built once per corpus and model.

BEIR layout (Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation
of Information Retrieval Models", NeurIPS 2021 Datasets track): ``corpus.jsonl``
(``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score`` with a header line).

The memory is cached under ``<cache>/<corpus-hash>-<model-slug>/`` (SQLite + index):
the hash covers every document's id, title and text *and* the chunking parameters, so
a second run with the same corpus, model and chunking reuses the stored vectors, and
an interrupted build resumes where it stopped. Vectors are also kept by chunk text
in ``<cache>/vectors-<model-slug>.db`` (see :class:`VectorCache`), so a build with
other chunking parameters embeds only the chunks whose text is new.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from memory_pipeline.config import Settings, default_cache_dir
from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import InvalidInputError, MemoryPipelineError
from memory_pipeline.ingest.loaders import LoadedDocument, load_text
from memory_pipeline.metadata import MAX_TITLE_CHARS, strip_controls
from memory_pipeline.store import Store, now_utc
from memory_pipeline.store.engine import sqlite_url
from memory_pipeline.system import MemorySystem

# Bump when the way documents become chunks changes, so old caches are not reused.
# v2: stored through the one ingestion path (control characters removed, as for any text).
_LAYOUT = "beir-doc-v2"
_INGEST_SLICE = 128  # documents per ingest call: a fine-grained bar and resumable progress


@dataclass(frozen=True)
class BeirDoc:
    doc_id: str
    title: str
    text: str

    def as_markdown(self) -> str:
        """Title as a heading: the chunker repeats it on every chunk of a long document."""
        title = " ".join(self.title.split())
        return f"# {title}\n\n{self.text}" if title else self.text


@dataclass
class BeirDataset:
    name: str
    corpus: list[BeirDoc]
    queries: dict[str, str]  # only queries with judgements in the split
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> graded relevance

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for d in self.corpus:
            for part in (d.doc_id, d.title, d.text):
                h.update(part.encode("utf-8"))
                h.update(b"\x1f")
        return h.hexdigest()


@dataclass(frozen=True)
class BuiltMemory:
    system: MemorySystem
    path: Path
    reused: bool
    documents: int
    chunks: int
    embedded: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    partial: bool = False


def _read_jsonl(path: Path) -> Iterable[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"{path}:{n}: not a JSON line ({exc})") from exc


def read_corpus(path: Path) -> list[BeirDoc]:
    return [
        BeirDoc(str(row["_id"]), str(row.get("title") or ""), str(row.get("text") or ""))
        for row in _read_jsonl(path)
    ]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if not line.strip() or (n == 1 and parts[0] == "query-id"):
                continue
            if len(parts) != 3:
                raise InvalidInputError(f"{path}:{n}: expected query-id, corpus-id, score")
            try:
                grade = int(float(parts[2]))
            except ValueError as exc:
                raise InvalidInputError(f"{path}:{n}: score {parts[2]!r} is not a number") from exc
            qrels.setdefault(parts[0], {})[parts[1]] = grade
    return qrels


def load_beir(
    root: Path, *, split: str = "test", extra_corpus: Sequence[Path] = (), name: str | None = None
) -> BeirDataset:
    """Load a BEIR folder; ``extra_corpus`` files (e.g. distractors) join the corpus."""
    root = Path(root)
    missing = [
        p
        for p in (root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv")
        if not p.exists()
    ]
    if missing:
        raise InvalidInputError(
            f"{root} is not a BEIR folder: missing {', '.join(str(p) for p in missing)}"
        )
    corpus = read_corpus(root / "corpus.jsonl")
    for extra in extra_corpus:
        if not Path(extra).exists():
            raise InvalidInputError(f"extra corpus file {extra} does not exist")
        corpus.extend(read_corpus(Path(extra)))
    seen: set[str] = set()
    for d in corpus:
        if d.doc_id in seen:
            raise InvalidInputError(f"{root}: document id {d.doc_id!r} occurs twice in the corpus")
        seen.add(d.doc_id)
    qrels = read_qrels(root / "qrels" / f"{split}.tsv")
    texts = {str(r["_id"]): str(r.get("text") or "") for r in _read_jsonl(root / "queries.jsonl")}
    queries = {qid: texts[qid] for qid in qrels if qid in texts and texts[qid].strip()}
    label = name or root.name + "".join(f"+{Path(e).stem}" for e in extra_corpus)
    return BeirDataset(label, corpus, queries, {q: qrels[q] for q in queries})


def subset(ds: BeirDataset, max_docs: int, max_queries: int | None = None) -> BeirDataset:
    """A smaller set: queries picked evenly across the set, all their relevant documents,
    and other documents picked evenly across the corpus (so distractors appended at its
    end are sampled too). Deterministic, so a subset is cached like any corpus."""
    qids = list(ds.queries)
    if max_queries and max_queries < len(qids):
        step = len(qids) / max_queries
        qids = [qids[int(i * step)] for i in range(max_queries)]
    wanted = {d for q in qids for d, g in ds.qrels[q].items() if g > 0}
    keep = [d for d in ds.corpus if d.doc_id in wanted]
    others = [d for d in ds.corpus if d.doc_id not in wanted]
    room = max(0, max_docs - len(keep))
    if room and others:
        step = len(others) / room
        keep += [others[int(i * step)] for i in range(min(room, len(others)))]
    ids = {d.doc_id for d in keep}
    qids = [q for q in qids if any(d in ids for d in ds.qrels[q])]
    # Corpus order is kept: with every document kept, the fingerprint (and so the cached
    # memory) is the full set's.
    corpus = [d for d in ds.corpus if d.doc_id in ids]
    label = ds.name if len(corpus) == len(ds.corpus) else f"{ds.name}[{len(corpus)}docs]"
    if len(qids) < len(ds.queries):
        label += f"[{len(qids)}q]"
    return BeirDataset(
        label, corpus, {q: ds.queries[q] for q in qids}, {q: ds.qrels[q] for q in qids}
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "model"


def default_eval_cache() -> Path:
    return default_cache_dir().parent / "eval"


def memory_path(ds: BeirDataset, model_id: str, settings: Settings, cache_root: Path) -> Path:
    ingest = settings.ingest
    # The redaction step changes what is stored only when it is not the default (on, no
    # allow-list): a memory built either way is kept apart from the other.
    redaction = (
        ""
        if (ingest.redact, ingest.redact_allow) == ("on", "")
        else (f"|redact={ingest.redact}|allow={ingest.redact_allow}")
    )
    key = hashlib.sha256(
        f"{ds.fingerprint()}|{_LAYOUT}|{ingest.max_chunk_size}|{ingest.chunk_overlap}{redaction}".encode()
    ).hexdigest()[:16]
    return cache_root / f"{key}-{_slug(model_id)}"


def build_order(ds: BeirDataset) -> list[BeirDoc]:
    """Judged documents first, then the others in a fixed pseudo-random order.

    A build cut short (``embed_budget``) then holds every relevant document and an
    unbiased sample of the rest, so it can already be evaluated, as a smaller corpus.
    """
    judged = {d for qrels in ds.qrels.values() for d, g in qrels.items() if g > 0}
    first = [d for d in ds.corpus if d.doc_id in judged]
    rest = [d for d in ds.corpus if d.doc_id not in judged]
    random.Random(0).shuffle(rest)
    return first + rest


def open_beir_memory(
    ds: BeirDataset,
    embedder: Embedder,
    settings: Settings,
    *,
    cache_root: Path | None = None,
    progress: bool = True,
    embed_budget: float | None = None,
) -> BuiltMemory:
    """The data set as a memory of its own; built (and embedded) only the first time.

    ``embed_budget`` (seconds) stops embedding once spent: the memory is then partial
    (see :func:`build_order`), says so in its notes, and the next call resumes it.
    """
    started = time.perf_counter()
    cache_root = cache_root or default_eval_cache()
    path = memory_path(ds, embedder.model_id, settings, cache_root)
    path.mkdir(parents=True, exist_ok=True)
    local = settings.replace(
        db_path=path / "memory.db", index_path=path / "index", database_url=None
    )
    system = MemorySystem(local, embedder=embedder)
    marker = path / "complete.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        # Vectors are reused; the index is brought up to the current rules (a no-op
        # unless e.g. the BM25 token rules changed since it was built).
        system.update_index()
        return BuiltMemory(
            system, path, True, info["documents"], info["chunks"], 0, time.perf_counter() - started
        )
    have = system.store.document_ids()
    todo = [d for d in build_order(ds) if d.doc_id not in have]
    deadline = None if embed_budget is None else started + embed_budget
    cache = VectorCache(cache_root, embedder.model_id)
    # The build goes through the one ingestion path, with vectors cached by chunk text
    # across memories of this model; the memory returned embeds with the plain embedder.
    builder = MemorySystem(local, embedder=CachingEmbedder(embedder, cache))
    try:
        notes, done = _ingest(builder, ds.name, todo, progress, deadline)
        embedded = builder.embedder.fresh  # type: ignore[attr-defined]
    finally:
        builder.close()
        cache.close()
    system.update_index()
    counts = system.counts()
    if not done:
        notes.append(
            f"partial memory: {counts['documents']} of {len(ds.corpus)} documents embedded "
            "(judged documents first, then a fixed random sample of the others); "
            "metrics are for this smaller corpus. Run again to resume the build."
        )
    else:
        marker.write_text(
            json.dumps(
                {
                    "dataset": ds.name,
                    "model_id": embedder.model_id,
                    "documents": counts["documents"],
                    "chunks": counts["chunks"],
                    "max_chunk_size": settings.ingest.max_chunk_size,
                    "chunk_overlap": settings.ingest.chunk_overlap,
                    "built_at": now_utc().isoformat(),
                },
                indent=2,
            )
        )
    return BuiltMemory(
        system,
        path,
        False,
        counts["documents"],
        counts["chunks"],
        embedded,
        time.perf_counter() - started,
        notes,
        partial=not done,
    )


class VectorCache:
    """Document vectors of one model keyed by the SHA-256 of the chunk text.

    Embedding is nearly all the cost of building an evaluation memory; this cache
    makes a rebuild with other chunking parameters pay only for chunks whose text
    changed. On opening it takes in the vectors of every cached memory of the same
    model (``<cache>/*-<model-slug>/memory.db``) that it has not seen yet.
    """

    def __init__(self, cache_root: Path, model_id: str) -> None:
        self.path = cache_root / f"vectors-{_slug(model_id)}.db"
        self.model_id = model_id
        self._db = sqlite3.connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS seeded (memory TEXT PRIMARY KEY)")
        self._seed(cache_root)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def _seed(self, cache_root: Path) -> None:
        done = {row[0] for row in self._db.execute("SELECT memory FROM seeded")}
        for db in sorted(cache_root.glob(f"*-{_slug(self.model_id)}/memory.db")):
            if db.parent.name in done or not (db.parent / "complete.json").exists():
                continue
            try:
                src = Store(sqlite_url(db))
            except (MemoryPipelineError, sa.exc.SQLAlchemyError):
                continue  # not a memory of ours (or another schema): nothing to take
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                    (
                        (self.key(text), blob)
                        for text, blob in src.iter_content_vectors(self.model_id)
                    ),
                )
            finally:
                src.close()
            self._db.execute("INSERT INTO seeded VALUES (?)", (db.parent.name,))
        self._db.commit()

    def get(self, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``."""
        out: dict[int, np.ndarray] = {}
        for i, text in enumerate(texts):
            row = self._db.execute(
                "SELECT vector FROM vectors WHERE key = ?", (self.key(text),)
            ).fetchone()
            if row is not None:
                out[i] = np.frombuffer(row[0], dtype=np.float32)
        return out

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self._db.executemany(
            "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
            (
                (self.key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for t, v in zip(texts, vectors, strict=True)
            ),
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()


class CachingEmbedder:
    """An embedder that takes document vectors from a ``VectorCache`` where it has them.

    The same embedding space as the embedder it wraps (same ``model_id``); ``fresh``
    counts the texts it really embedded.
    """

    def __init__(self, inner: Embedder, cache: VectorCache) -> None:
        self.inner = inner
        self.cache = cache
        self.fresh = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        known = self.cache.get(texts)
        todo = [i for i in range(len(texts)) if i not in known]
        rows = dict(known)
        if todo:
            fresh = self.inner.embed_documents([texts[i] for i in todo], progress=progress)
            self.cache.put([texts[i] for i in todo], fresh)
            rows.update(zip(todo, fresh, strict=True))
            self.fresh += len(todo)
        if not texts:
            return self.inner.embed_documents([])
        return np.stack([np.asarray(rows[i], dtype=np.float32) for i in range(len(texts))])


def as_loaded(d: BeirDoc) -> tuple[LoadedDocument | None, str | None]:
    """A corpus document as the ingestion path takes it, and a note when it was changed.

    Its id is the corpus id and its source ``beir:<id>``; control characters (left by a
    bad decode upstream) are removed, as for any text the memory converts itself.
    """
    text = d.as_markdown()
    clean = strip_controls(text)
    if not clean.strip():
        return None, f"document {d.doc_id} has no text; skipped"
    note = None
    if clean != text:
        note = f"document {d.doc_id}: {len(text) - len(clean)} control character(s) removed"
    title = strip_controls(" ".join((d.title or d.doc_id).split()))[:MAX_TITLE_CHARS]
    loaded = load_text(clean, title or d.doc_id, source=f"beir:{d.doc_id}", doc_id=d.doc_id)
    return loaded, note


def _ingest(
    system: MemorySystem,
    name: str,
    docs: Sequence[BeirDoc],
    progress: bool,
    deadline: float | None = None,
) -> tuple[list[str], bool]:
    """Store ``docs`` through ``MemorySystem.ingest_loaded``, a slice at a time (the index
    is updated once, afterwards). Returns (notes, whether every document was stored)."""
    from tqdm import tqdm

    notes: list[str] = []
    loaded: list[LoadedDocument] = []
    for d in docs:
        doc, note = as_loaded(d)
        if note:
            notes.append(note)
        if doc is not None:
            loaded.append(doc)
    bar = tqdm(
        total=len(loaded), desc=f"building {name}", unit="doc", disable=not progress, mininterval=2
    )
    try:
        for start in range(0, len(loaded), _INGEST_SLICE):
            if deadline is not None and time.perf_counter() >= deadline:
                return notes, False
            part = loaded[start : start + _INGEST_SLICE]
            system.ingest_loaded(part, update_index=False)
            bar.update(len(part))
    finally:
        bar.close()
    return notes, True


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """All query vectors in one batched call when the embedder allows it."""
    batch = getattr(embedder, "embed_queries", None)
    if callable(batch):
        return np.asarray(batch(list(texts)), dtype=np.float32)
    model = getattr(embedder, "model", None)
    if model is not None and hasattr(model, "encode"):
        # A sentence-transformers model: the same "query" prompt embed_query applies.
        prompts = getattr(model, "prompts", None) or {}
        kwargs = {"prompt_name": "query"} if "query" in prompts else {}
        vecs = model.encode(
            list(texts),
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=len(texts) > 256,
            **kwargs,
        )
        return np.asarray(vecs, dtype=np.float32)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)
