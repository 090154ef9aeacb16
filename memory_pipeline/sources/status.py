"""What is under the source roots, and how each file stands against the store.

``scan`` only lists and stats (cheap: the change sensor calls it every tick);
``file_status`` reads and hashes one file and asks the store whether its current
content is what is stored. The store is the truth for *stored*; the ledger adds
what the store cannot know (parse failures, the sessions an export produced).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, Self

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.chatgpt import parse_chatgpt_export
from memory_pipeline.sources.codex import parse_codex_session
from memory_pipeline.sources.conversations import (
    Conversation,
    Reader,
    parse_claude_ai_export,
    parse_claude_code_session,
)
from memory_pipeline.sources.ledger import FAILED, Ledger
from memory_pipeline.sources.sources_file import SourceKind, SourceRoot, SourcesConfig, absolute
from memory_pipeline.sources.transcripts import parse_transcript
from memory_pipeline.spaces import Spaces, doc_id_in_space
from memory_pipeline.types import ChunkRecord, DocumentInfo

READERS: dict[SourceKind, Reader] = {
    SourceKind.CLAUDE_AI: parse_claude_ai_export,
    SourceKind.CLAUDE_CODE: parse_claude_code_session,
    SourceKind.TRANSCRIPT: parse_transcript,
    SourceKind.CODEX: parse_codex_session,
    SourceKind.CHATGPT: parse_chatgpt_export,
}


class StoreView(Protocol):
    """The read side of the store that status and sync need."""

    @property
    def spaces(self) -> Spaces: ...

    def bound(self, spaces: Spaces) -> Self:
        """The same store under another binding (``Store.bound``)."""
        ...

    def documents_by_source(self, source: str) -> list[DocumentInfo]: ...

    def get_document(self, doc_id: str) -> DocumentInfo | None: ...

    def document_chunks(self, doc_id: str) -> list[ChunkRecord]: ...


class FileState(StrEnum):
    NEW = "new"  # nothing stored from this file yet
    INGESTED = "ingested"  # what is stored is the file's current content
    CHANGED = "changed"  # something is stored, but not the current content
    FAILED = "failed"  # the current content could not be read or parsed
    DELETED = "deleted"  # the file is gone but its documents are still stored


@dataclass(frozen=True)
class SourceFile:
    path: Path
    root: SourceRoot
    size: int
    mtime_ns: int

    @property
    def signature(self) -> str:
        """Changes whenever the file is rewritten; what the change sensor compares."""
        return f"{self.mtime_ns}:{self.size}"


@dataclass(frozen=True)
class FileStatus:
    path: Path
    root: str
    kind: SourceKind
    state: FileState
    reason: str = ""
    documents: int = 0


@dataclass(frozen=True)
class Survey:
    """Every (non-hidden) file under the roots: those a root's patterns pick, and the rest."""

    files: list[SourceFile]
    unsupported: list[Path]  # under a root, picked by no root's patterns: ignored, listed

    def unsupported_by_extension(self) -> dict[str, int]:
        """Counts by lower-case extension ("(none)" for a name without one), sorted."""
        counts: dict[str, int] = {}
        for path in self.unsupported:
            ext = path.suffix.lower() or "(none)"
            counts[ext] = counts.get(ext, 0) + 1
        return dict(sorted(counts.items()))


def survey(config: SourcesConfig, *, unsupported: bool = True) -> Survey:
    """Every file under the roots, sorted; hidden files and folders are skipped.

    A file no root picks (``.png``, ``.bin``, a pattern's exclusion) is listed as
    unsupported rather than passed over in silence; ``unsupported=False`` skips that
    (the change sensor's every-tick scan does not need it).
    """
    out: list[SourceFile] = []
    seen: set[Path] = set()
    others: set[Path] = set()
    for root in config.roots:
        if not root.path.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root.path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path in seen or name.startswith("."):
                    continue
                picked = root.matches(path)
                if not picked and not unsupported:
                    continue
                try:
                    st = path.stat()
                except OSError:
                    continue  # vanished between listing and stat, or a dangling link
                if not stat.S_ISREG(st.st_mode):
                    continue
                if not picked:
                    others.add(path)
                    continue
                seen.add(path)
                out.append(SourceFile(path, root, st.st_size, st.st_mtime_ns))
    return Survey(sorted(out, key=lambda f: f.path), sorted(others - seen))


def scan(config: SourcesConfig) -> list[SourceFile]:
    """Every file the roots' patterns pick, sorted; hidden files and folders are skipped."""
    return survey(config, unsupported=False).files


def missing_roots(config: SourcesConfig) -> list[SourceRoot]:
    return [r for r in config.roots if not r.path.is_dir()]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_key(path: Path) -> str:
    """The ``source`` the store records for a file (the loader names files by resolved path)."""
    return str(Path(path).resolve())


def conversation_source(conv: Conversation) -> str:
    """The ``source`` of a conversation's document (texts are named ``text:<title>``)."""
    return f"text:{conv.source_title}"


def is_current(store: StoreView, conv: Conversation) -> bool | None:
    """None: never imported; True: stored as it is now; False: stored, but it changed.

    A session's document is named by its rendered bytes, so "as it is now" is a hash
    comparison: a turn edited, added or removed, or a new last activity, all change it.
    """
    docs = store.documents_by_source(conversation_source(conv))
    if not docs:
        return None
    sha = hashlib.sha256(conv.to_markdown().encode("utf-8")).hexdigest()
    return any(d.content_hash == sha for d in docs)


def plural(n: int, word: str = "conversation") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def file_status(store: StoreView, sf: SourceFile, ledger: Ledger) -> FileStatus:
    if sf.root.space is not None:  # the root's files live in a space of their own
        store = store.bound(Spaces.bound(sf.root.space))

    def status(state: FileState, reason: str = "", documents: int = 0) -> FileStatus:
        return FileStatus(sf.path, sf.root.name, sf.root.kind, state, reason, documents)

    try:
        sha = file_sha256(sf.path)
    except OSError as exc:
        return status(FileState.FAILED, f"cannot be read: {exc.strerror or exc}")
    entry = ledger.get(sf.path)
    if entry is not None and entry.status == FAILED and entry.sha256 == sha:
        return status(FileState.FAILED, entry.error)
    if sf.root.kind is SourceKind.FILES:
        docs = store.documents_by_source(source_key(sf.path))
        if any(d.content_hash == sha for d in docs):
            return status(FileState.INGESTED, documents=len(docs))
        if docs:
            return status(FileState.CHANGED, "content differs from the stored version", len(docs))
        # Documents are named by their bytes and space (doc_id_for).
        twin = store.get_document(doc_id_in_space(sha, store.spaces.write))
        if twin is not None:
            return status(FileState.INGESTED, f"identical to {twin.source}", 1)
        return status(FileState.NEW)
    try:
        conversations = READERS[sf.root.kind](sf.path)
    except InvalidInputError as exc:
        return status(FileState.FAILED, str(exc))
    states = [is_current(store, c) for c in conversations]
    stored = sum(s is not None for s in states)
    produced = {conversation_source(c) for c in conversations}
    gone = [s for s in (entry.sources if entry else []) if s not in produced]
    if any(store.documents_by_source(s) for s in gone):
        return status(FileState.CHANGED, f"{plural(len(gone))} left the export", stored)
    if not conversations:
        return status(FileState.INGESTED, "no conversation with messages")
    if all(s is True for s in states):
        return status(FileState.INGESTED, plural(len(states)), stored)
    if stored == 0:
        return status(FileState.NEW, plural(len(states)))
    stale = sum(s is not True for s in states)
    return status(FileState.CHANGED, f"{stale} of {plural(len(states))} new or updated", stored)


def deleted_statuses(
    store: StoreView, config: SourcesConfig, ledger: Ledger, present: Sequence[Path]
) -> list[FileStatus]:
    """Files the ledger knows that are gone while their documents are still stored."""
    here = {str(p) for p in present}
    out = []
    for name, entry in sorted(ledger.files.items()):
        path = Path(name)
        if name in here or path.exists():
            continue
        root = config.root_for(path)
        where = store.bound(Spaces.bound(root.space)) if root is not None and root.space else store
        sources = entry.sources or [source_key(path)]
        n = sum(len(where.documents_by_source(s)) for s in sources)
        if n:
            out.append(
                FileStatus(
                    path,
                    root.name if root else "-",
                    root.kind if root else SourceKind.FILES,
                    FileState.DELETED,
                    "file removed; its documents are deleted by the next sync",
                    n,
                )
            )
    return out


def sources_status(store: StoreView, config: SourcesConfig, ledger: Ledger) -> list[FileStatus]:
    """Every file under the roots with its state, then removed files still stored."""
    files = scan(config)
    statuses = [file_status(store, f, ledger) for f in files]
    return statuses + deleted_statuses(store, config, ledger, [f.path for f in files])


def as_absolute(paths: Sequence[str | Path]) -> list[Path]:
    return [absolute(p) for p in paths]


#: The states of a file under a root whose current content is not in the store.
NOT_INGESTED = (FileState.NEW, FileState.CHANGED, FileState.FAILED)


def not_ingested(store: StoreView, config: SourcesConfig, ledger: Ledger) -> list[FileStatus]:
    """Files under the roots whose current content the store does not hold: new,
    changed since they were ingested, or failing to read or parse."""
    return [s for s in sources_status(store, config, ledger) if s.state in NOT_INGESTED]


def refused(config: SourcesConfig, ledger: Ledger) -> dict[Path, str]:
    """Files under the roots whose current content a sync refused, with its reason.

    A ledger failure counts while the file still holds the bytes that failed (or cannot
    be read at all); once the file changes it is new or changed again, not refused.
    """
    out: dict[Path, str] = {}
    for name, entry in sorted(ledger.failures().items()):
        path = Path(name)
        if not path.is_file() or config.root_for(path) is None:
            continue  # a removed file no longer needs fixing
        try:
            same = file_sha256(path) == entry.sha256
        except OSError as exc:
            out[path] = f"cannot be read: {exc.strerror or exc}"
            continue
        if same:
            out[path] = entry.error
    return out


def describe_not_ingested(statuses: Sequence[FileStatus]) -> list[str]:
    """One line per file: its path, its state and why."""
    return [f"{s.path} ({s.state.value}{': ' + s.reason if s.reason else ''})" for s in statuses]
