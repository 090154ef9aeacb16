"""Scrub: find the secrets and ``<private>`` spans a memory already holds, and take them out.

Redaction at the door (docs/hygiene.md) keeps them from coming in; a memory filled before
it, or with it off, still holds them. ``scan`` passes every stored text of the spaces the
memory may change through the same ``Redactor`` — each chunk's content, index text and
tags, each document's title and source, what was handed to agents, every line of the
forgetting archive and, bound to every space (``--all-spaces``), every file of the capture
spool, which every space shares — and says what it would change: the
kind and the place, never the value. The redactor reads one text at a time; the lines of a
private key longer than a chunk are found by reading each document's chunks together, in
the store and in the archive (``hygiene/keys.py``). ``apply`` then rewrites them:

1. a mark (``scrub.pending`` beside the archive) says a purge is owed;
2. the archive and the spool files are rewritten whole, each written aside and renamed;
3. the chunks (texts, content hash, vector of the new text, tags that held a secret), the
   documents' titles and sources and the handed records change in one transaction;
4. the index is rebuilt from the store and its earlier versions removed;
5. the database's freed pages are rewritten (``Store.purge_freed``);
6. the mark goes.

Killed at any point, nothing is lost: each rewrite is whole or not at all, and a new
``apply`` finds what is left and, while the mark is there, purges again. A second scan
finds nothing: a marker (``[secret: kind]``) is not a secret.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_pipeline.durable import fsync_dir, replace_text, write_bytes
from memory_pipeline.hygiene.keys import KIND as KEY_KIND
from memory_pipeline.hygiene.keys import key_lines, take_lines
from memory_pipeline.hygiene.private import closing_kinds
from memory_pipeline.hygiene.redactor import Redacted, Redactor
from memory_pipeline.hygiene.secrets import MARKER_RE, find_secrets
from memory_pipeline.ingest.turns import (
    DEFAULT_TURN_INDEXING,
    TurnIndexing,
    TurnText,
    own_text,
)
from memory_pipeline.ingest.turns import index_text as turn_index_text
from memory_pipeline.memory.archive import (
    archive_lock,
    encode_vector,
    iter_archive,
    record_space,
)
from memory_pipeline.store import content_sha
from memory_pipeline.store.rows import turns_from
from memory_pipeline.store.scrubbing import (
    ChangeFix,
    ChunkFix,
    DocumentFix,
    HandedFix,
    ScrubWrite,
    StoredChunk,
)
from memory_pipeline.types import Blend, Turn

if TYPE_CHECKING:
    from memory_pipeline.embedding.base import Embedder
    from memory_pipeline.index.protocols import IndexUpdater
    from memory_pipeline.store import Store

MARK = "scrub.pending"
#: Files of the capture spool read as text; the lock and anything larger are left alone.
SPOOL_MAX_BYTES = 16 * 1024 * 1024
EMBED_BATCH = 256
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Finding:
    """One place that holds something to take out: its kind, where, how many times."""

    kind: str
    place: str
    count: int = 1


@dataclass(frozen=True)
class ChunkPlan:
    """A chunk's texts as they are to be kept, and what its vector is made of: the text
    its indices hold, or for a conversation's turn its own lines blended with its
    neighbours' (``ingest/turns.py``), as ingesting made it."""

    id: int
    content: str
    index_text: str | None
    drop_tags: tuple[str, ...]
    embed: str | Blend


@dataclass
class Plan:
    """What a scan found and what ``apply`` would write."""

    findings: list[Finding] = field(default_factory=list)
    chunks: list[ChunkPlan] = field(default_factory=list)
    documents: list[DocumentFix] = field(default_factory=list)
    handed: list[HandedFix] = field(default_factory=list)
    history: list[ChangeFix] = field(default_factory=list)
    archive: list[tuple[int, str]] = field(default_factory=list)  # line number, new line
    spool: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def by_kind(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for f in self.findings:
            counts[f.kind] += f.count
        return counts

    @property
    def places(self) -> dict[str, int]:
        """How many of each kind of place change."""
        return {
            "chunks": len(self.chunks),
            "documents": len(self.documents),
            "handed records": len(self.handed),
            "history records": len(self.history),
            "archive lines": len(self.archive),
            "capture files": len(self.spool),
        }

    def __bool__(self) -> bool:
        return bool(self.findings)


@dataclass(frozen=True)
class Where:
    """The memory's parts a scrub reads and writes."""

    store: Store
    embedder: Embedder
    updater: IndexUpdater
    archive_file: Path
    capture_dir: Path
    redactor: Redactor
    indexing: TurnIndexing = DEFAULT_TURN_INDEXING

    @property
    def mark(self) -> Path:
        return self.archive_file.parent / MARK

    @property
    def every_space(self) -> bool:
        """Bound to every space: what all spaces share (the capture spool, archive lines
        that name none) is scrubbed too."""
        return self.store.spaces.read is None

    def changes(self, space: str) -> bool:
        return self.every_space or space == self.store.spaces.write


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    applied: bool
    purged: list[str] = field(default_factory=list)


def _note(plan: Plan, done: Redacted, place: str) -> None:
    plan.findings += [Finding(kind, place, n) for kind, n in sorted(done.counts.items())]


def _doc_place(doc_id: str, space: str) -> str:
    return f"space {space}, document {doc_id}"


def scan(where: Where, *, progress: Callable[[str], None] | None = None) -> Plan:
    """Every stored text of the spaces the memory may change, through the redactor."""
    redactor = where.redactor
    plan = Plan()
    say = progress or (lambda _: None)
    say("chunks")
    by_doc: dict[str, list[StoredChunk]] = {}
    for chunk in where.store.stored_chunks():
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    archived = _archived(where)
    lines_of = _key_lines(by_doc, (r for r in archived.values() if where.changes(record_space(r))))
    for doc_id, chunks in by_doc.items():
        chunks.sort(key=lambda c: c.chunk_index)
        plan.chunks += _scan_document(where, plan, chunks, lines_of.get(doc_id, _NONE))
    every_key_line = frozenset().union(*lines_of.values())
    say("documents")
    for doc_id, space, title, source in where.store.stored_documents():
        place = _doc_place(doc_id, space)
        new_title, new_source = redactor.redact(title), redactor.redact(source)
        _note(plan, new_title, f"{place}: title")
        _note(plan, new_source, f"{place}: source")
        if new_title.changed or new_source.changed:
            plan.documents.append(DocumentFix(doc_id, new_title.text, new_source.text))
    say("handed records")
    for record_id, space, query, block, hits in where.store.stored_handed():
        place = f"space {space}, handed record {record_id}"
        texts = [
            _take_keys(redactor.redact(t), every_key_line) if t else Redacted(t or "")
            for t in (query, block, hits)
        ]
        for done, what in zip(texts, ("query", "block", "titles"), strict=True):
            _note(plan, done, f"{place}: {what}")
        if any(t.changed for t in texts):
            new_query, new_block, new_hits = (t.text for t in texts)
            plan.handed.append(
                HandedFix(
                    record_id,
                    new_query if query is not None else None,
                    new_block if block is not None else None,
                    _json_or(new_hits, hits),
                )
            )
    say("history")
    for record_id, space, before, after in where.store.stored_history():
        place = f"space {space}, history record {record_id}"
        new_before, taken_before = _redact_json(where.redactor, before)
        new_after, taken_after = _redact_json(where.redactor, after)
        _note(plan, taken_before, f"{place}: before")
        _note(plan, taken_after, f"{place}: after")
        if taken_before.changed or taken_after.changed:
            plan.history.append(ChangeFix(record_id, new_before, new_after))
    say("archive")
    _scan_archive(where, plan, archived, lines_of)
    say("capture spool")
    _scan_spool(where, plan)
    return plan


def _archived(where: Where) -> dict[int, dict[str, Any]]:
    """The archive's records, by line number."""
    if not where.archive_file.exists():
        return {}
    return {n: record for n, record, _ in iter_archive(where.archive_file) if record is not None}


def _key_lines(
    by_doc: dict[str, list[StoredChunk]], archived: Iterable[dict[str, Any]]
) -> dict[str, frozenset[str]]:
    """Each document's lines of private keys (``hygiene/keys.py``), read over all its
    chunks in order, those in the store and those forgotten to the archive together: a key
    longer than a chunk has lines in chunks the redactor, reading one at a time, lets by."""
    texts = {doc: [(c.chunk_index, c.content) for c in chunks] for doc, chunks in by_doc.items()}
    for record in archived:
        doc, index, content = record.get("doc_id"), record.get("chunk_index"), record.get("content")
        if isinstance(doc, str) and isinstance(index, int) and isinstance(content, str):
            texts.setdefault(doc, []).append((index, content))
    found = {doc: key_lines(t for _, t in sorted(pairs)) for doc, pairs in texts.items()}
    return {doc: lines for doc, lines in found.items() if lines}


def _take_keys(done: Redacted, lines: frozenset[str]) -> Redacted:
    """What the redactor left, less the lines of keys found across the document."""
    text, taken = take_lines(done.text, lines)
    return Redacted(text, done.counts + Counter({KEY_KIND: taken})) if taken else done


def _scan_document(
    where: Where, plan: Plan, chunks: list[StoredChunk], private: frozenset[str]
) -> list[ChunkPlan]:
    """One document's chunks: each text through the redactor, then less the lines of the
    private keys it holds (``private``); a conversation's turns, when any of them changes, indexed
    again from the redacted turns (a turn's index text quotes its neighbours: redacting
    that quote alone could leave the rest of a key it cut)."""
    redactor = where.redactor
    contents: list[str] = []
    index_texts: list[str | None] = []
    dropped: list[tuple[str, ...]] = []
    changed = False
    closed_after = _closed_after(chunks)
    for chunk, later in zip(chunks, closed_after, strict=True):
        place = f"{_doc_place(chunk.doc_id, chunk.space)}, chunk {chunk.chunk_index}"
        # a turn's chunk is (a part of) one message; any other chunk is a document's, kept
        # whole after a tag it never closes, as it was when it was stored, unless a later
        # chunk closes it: a span the chunking cut (stored with the step off) goes
        document = chunk.turns is None
        content = redactor.redact(chunk.content, document=document)
        if any(tag.kind in later for tag in content.unclosed):
            document = False
            content = redactor.redact(chunk.content)
        content = _take_keys(content, private)
        _note(plan, content, f"{place}: text")
        index_text = chunk.index_text
        if index_text is not None:
            done = _take_keys(redactor.redact(index_text, document=document), private)
            _note(plan, done, f"{place}: index text")
            index_text = done.text
        drop = []
        for n, tag in enumerate(chunk.tags, 1):
            found = find_secrets(tag, redactor.allow)
            if found:
                drop.append(tag)
                plan.findings.append(Finding(found[0].kind, f"{place}: tag {n}"))
        changed = changed or content.changed or index_text != chunk.index_text or bool(drop)
        contents.append(content.text)
        index_texts.append(index_text)
        dropped.append(tuple(drop))
    if not changed:
        return []
    embeds: list[str | Blend]
    if all(c.turns for c in chunks):
        index_texts, embeds = _turns_again(chunks, contents, where.indexing)
    else:
        embeds = [t if t is not None else c for c, t in zip(contents, index_texts, strict=True)]
    return [
        ChunkPlan(chunk.id, content, index_text, drop, embed)
        for chunk, content, index_text, drop, embed in zip(
            chunks, contents, index_texts, dropped, embeds, strict=True
        )
        if content != chunk.content or index_text != chunk.index_text or drop
    ]


def _closed_after(chunks: list[StoredChunk]) -> list[frozenset[str]]:
    """For each of a document's chunks, the kinds of tag a later chunk closes."""
    out: list[frozenset[str]] = []
    seen: frozenset[str] = frozenset()
    for chunk in reversed(chunks):
        out.append(seen)
        seen = seen | closing_kinds(chunk.content)
    return out[::-1]


def _turns_again(
    chunks: list[StoredChunk], contents: list[str], indexing: TurnIndexing
) -> tuple[list[str | None], list[str | Blend]]:
    """A conversation's chunks (in order, each a turn or a part of one) indexed as
    ``chunk_turns`` indexes them, from ``contents``: each chunk's index text and vector."""
    turns: list[TurnText] = []
    turn_of: list[int] = []  # chunk position -> its turn's position
    for chunk, content in zip(chunks, contents, strict=True):
        [turn] = turns_from(chunk.turns)[:1] or (Turn("", ""),)
        if turns and turns[-1].turn_id == turn.turn_id and turn.turn_id:
            last = turns[-1]
            turns[-1] = TurnText(last.turn_id, last.speaker, last.said_at, f"{last.text} {content}")
        else:
            turns.append(TurnText(turn.turn_id, turn.speaker, turn.said_at, content))
        turn_of.append(len(turns) - 1)
    own = [
        own_text(turns[turn_of[k]], content.strip(), indexing) for k, content in enumerate(contents)
    ]
    texts: list[str | None] = [
        turn_index_text(turns, turn_of[k], own[k], indexing) for k in range(len(chunks))
    ]
    if indexing.blend is None:
        return texts, [t or "" for t in texts]
    parts_of: dict[int, list[int]] = {}
    for k, i in enumerate(turn_of):
        parts_of.setdefault(i, []).append(k)
    embeds: list[str | Blend] = []
    for k, i in enumerate(turn_of):
        around = tuple(own[c] for j in indexing.neighbours(turns, i) for c in parts_of.get(j, ()))
        embeds.append(Blend(own[k], around, indexing.blend))
    return texts, embeds


def _redact_json(redactor: Redactor, text: str | None) -> tuple[str | None, Redacted]:
    """A JSON value with each of its strings redacted, and what was taken from them all."""
    if text is None:
        return None, Redacted("")
    counts: Counter[str] = Counter()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            done = redactor.redact(value)
            counts.update(done.counts)
            return done.text
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    kept = walk(json.loads(text))
    return (json.dumps(kept, ensure_ascii=False) if counts else text), Redacted("", counts)


def _json_or(new: str, old: str) -> str:
    """A JSON text after redaction, when it still parses; else its strings redacted one
    by one could not be told apart: an empty list (the titles are the page's labels)."""
    try:
        json.loads(new)
    except json.JSONDecodeError:
        return "[]" if old.strip().startswith("[") else new
    return new


def _scan_archive(
    where: Where,
    plan: Plan,
    parsed: dict[int, dict[str, Any]],
    lines_of: dict[str, frozenset[str]],
) -> None:
    """The archive's lines (``parsed``: its records by line number), each record's texts
    less the lines of the private keys its document holds (``lines_of``, by document)."""
    if not where.archive_file.exists():
        return
    redactor = where.redactor
    with open(where.archive_file, "rb") as fh:
        raw_lines = fh.read().split(b"\n")
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        place = f"archive line {number}"
        record = parsed.get(number)
        if record is not None and not where.changes(record_space(record)):
            continue
        if record is None:  # not JSON: its text as text, when every space is scrubbed
            if not where.every_space:
                continue
            done = redactor.redact(raw.decode("utf-8", errors="replace"))
            _note(plan, done, place)
            if done.changed:
                plan.archive.append((number, done.text))
            continue
        private = lines_of.get(str(record.get("doc_id")), _NONE)
        if _redact_record(record, where, plan, place, private):
            plan.archive.append((number, json.dumps(record, ensure_ascii=False)))


def _redact_keys(
    mapping: dict[str, Any],
    keys: tuple[str, ...],
    where: Where,
    plan: Plan,
    place: str,
    private: frozenset[str] = _NONE,
    *,
    document: bool = False,
) -> bool:
    """Redact the text values of ``keys`` in ``mapping`` in place (as a document's, or as
    a message's; less ``private``, the lines of private keys), each find noted at ``place``
    and the key; whether any changed."""
    changed = False
    for key in keys:
        if isinstance(mapping.get(key), str):
            done = _take_keys(where.redactor.redact(mapping[key], document=document), private)
            _note(plan, done, f"{place}{key.replace('_', ' ')}")
            if done.changed:
                mapping[key], changed = done.text, True
    return changed


def _redact_record(
    record: dict[str, Any], where: Where, plan: Plan, place: str, private: frozenset[str]
) -> bool:
    """Redact an archive record in place, less ``private`` (the lines of the private keys
    its document holds); whether anything changed."""
    redactor = where.redactor
    turns = record.get("turns")
    texts = ("content", "index_text")
    changed = _redact_keys(record, texts, where, plan, f"{place}: ", private, document=not turns)
    if changed and turns and isinstance(record.get("index_text"), str):
        # an archived turn's neighbours may be gone: its own lines are made again from its
        # redacted text, and each other line of its index text (one line each, spaces
        # collapsed) is cut at its first marker, past which a key's lines may run on
        turn = Turn.from_dict(turns[0])
        said = TurnText(turn.turn_id, turn.speaker, turn.said_at, str(record["content"]))
        own = own_text(said, said.text.strip(), where.indexing)
        rest = str(record["index_text"]).split("\n")[own.count("\n") + 1 :]
        record["index_text"] = "\n".join([own, *(_cut_at_marker(line) for line in rest)])
    document = record.get("document")
    if isinstance(document, dict):
        changed |= _redact_keys(document, ("title", "source"), where, plan, f"{place}: document ")
    tags = record.get("tags")
    if isinstance(tags, list):
        kept = []
        for n, tag in enumerate(tags, 1):
            found = find_secrets(str(tag), redactor.allow)
            if found:
                plan.findings.append(Finding(found[0].kind, f"{place}: tag {n}"))
                changed = True
            else:
                kept.append(tag)
        record["tags"] = kept
    if changed:
        record["_scrubbed"] = True  # its vector is to be made again from the new text
    return changed


def _cut_at_marker(line: str) -> str:
    found = MARKER_RE.search(line)
    return line if found is None else line[: found.end()] + " …"


def _spool_files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        plain = path.is_file() and not path.is_symlink() and path.name != "worker.lock"
        if plain and path.stat().st_size <= SPOOL_MAX_BYTES:
            yield path


def _scan_spool(where: Where, plan: Plan) -> None:
    if not where.every_space:  # one spool for every space
        return
    for path in _spool_files(where.capture_dir):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        done = where.redactor.redact(text)
        _note(plan, done, f"capture spool {path.relative_to(where.capture_dir)}")
        if done.changed:
            plan.spool.append((path, done.text))


def apply(where: Where, plan: Plan, *, progress: Callable[[str], None] | None = None) -> Outcome:
    """Rewrite what ``plan`` found, then purge; see the module docstring for the order."""
    say = progress or (lambda _: None)
    if not plan and not where.mark.exists():
        return Outcome(plan, applied=False)
    where.mark.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(where.mark, b"a scrub rewrote texts; its purge is not finished\n")
    fsync_dir(where.mark.parent)
    if plan.archive:
        say("archive")
        _rewrite_archive(where, plan.archive)
    for path, text in plan.spool:
        replace_text(path, text)
    if plan.chunks or plan.documents or plan.handed or plan.history:
        say(f"{len(plan.chunks)} chunks")
        where.store.write_scrub(
            ScrubWrite(
                chunks=_fixes(where.embedder, plan.chunks),
                documents=plan.documents,
                handed=plan.handed,
                history=plan.history,
                model_id=where.embedder.model_id,
            )
        )
    say("index")
    where.updater.rebuild()
    where.updater.drop_older()
    say("database files")
    purged, whole = where.store.purge_freed()
    if whole:  # else the mark stays: the next run purges again
        where.mark.unlink(missing_ok=True)
        fsync_dir(where.mark.parent)
    return Outcome(plan, applied=True, purged=purged)


def _fixes(embedder: Embedder, chunks: list[ChunkPlan]) -> list[ChunkFix]:
    """Each chunk's new texts with its vector, made as ingesting makes it: of what its
    indices hold, or blended (``Blend``) for a conversation's turn."""
    out: list[ChunkFix] = []
    for start in range(0, len(chunks), EMBED_BATCH):
        batch = chunks[start : start + EMBED_BATCH]
        wanted: dict[str, None] = {}
        for c in batch:
            parts = (c.embed.own, *c.embed.around) if isinstance(c.embed, Blend) else (c.embed,)
            wanted.update(dict.fromkeys(parts))
        texts = list(wanted)
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        made = dict(zip(texts, vectors, strict=True))
        for c in batch:
            if isinstance(c.embed, Blend):
                vector = made[c.embed.own]
                if c.embed.around:
                    around = np.mean([made[t] for t in c.embed.around], axis=0)
                    vector = vector + c.embed.weight * around
                    vector = vector / np.linalg.norm(vector)
            else:
                vector = made[c.embed]
            indexed = c.index_text if c.index_text is not None else c.content
            out.append(
                ChunkFix(
                    id=c.id,
                    content=c.content,
                    index_text=c.index_text,
                    content_sha=content_sha(indexed),
                    token_count=embedder.count_tokens(c.content),
                    vector=np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
                    dim=int(vector.shape[0]),
                    drop_tags=c.drop_tags,
                )
            )
    return out


def _rewrite_archive(where: Where, changed: Iterable[tuple[int, str]]) -> None:
    """The archive with ``changed`` lines (number → new text), the rest byte for byte;
    a changed record's vector made again from its new text. Written aside, then renamed."""
    with archive_lock(where.archive_file):
        _rewrite_archive_locked(where, dict(changed))


def _rewrite_archive_locked(where: Where, new: dict[int, str]) -> None:
    path = where.archive_file
    lines = path.read_bytes().split(b"\n")
    out = []
    for number, raw in enumerate(lines, 1):
        if number not in new:
            out.append(raw)
            continue
        text = new[number]
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            out.append(text.encode())
            continue
        if isinstance(record, dict) and record.pop("_scrubbed", False):
            indexed = record.get("index_text") or record.get("content") or ""
            vector = where.embedder.embed_documents([str(indexed)])[0]
            record["vector"] = encode_vector(vector)
            record["dim"] = int(vector.shape[0])
            record["model_id"] = where.embedder.model_id
            record["token_count"] = where.embedder.count_tokens(str(record.get("content") or ""))
        out.append(json.dumps(record, ensure_ascii=False).encode())
    aside = path.with_name(path.name + ".scrub")
    with open(aside, "wb") as fh:
        fh.write(b"\n".join(out))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(aside, path)
    fsync_dir(path.parent)
