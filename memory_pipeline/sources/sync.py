"""Bring the store in line with the source roots: plan which files to (re)ingest or delete, then do it.

A plan comes either from explicit paths (what the change sensor saw) or from a
full scan against the store. Applying it ingests each file on its own, so one bad
file is recorded as failed (with the reason) instead of failing the batch; it
never touches the index — publication is a separate, serialized step.

A conversation file is checked whole before any of it is stored: every session read,
rendered and its metadata validated, and none of its sessions already imported from
another file of the same space. One bad session refuses the file; nothing of it is
stored, and what an earlier version of it stored stays until it is fixed.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from memory_pipeline.config import Settings
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.loaders import LoadedDocument, load_file
from memory_pipeline.metadata import ChunkMetadata, validate_metadata
from memory_pipeline.sources.conversations import Conversation
from memory_pipeline.sources.ledger import FAILED, OK, Ledger
from memory_pipeline.sources.sources_file import SourceKind, SourceRoot, SourcesConfig, absolute
from memory_pipeline.sources.status import (
    READERS,
    FileState,
    FileStatus,
    StoreView,
    conversation_source,
    file_sha256,
    file_status,
    is_current,
    source_key,
    survey,
)
from memory_pipeline.spaces import Spaces
from memory_pipeline.types import IngestResult

PENDING_STATES = (FileState.NEW, FileState.CHANGED)


class SyncTarget(Protocol):
    """The part of MemorySystem a sync writes through."""

    settings: Settings

    @property
    def store(self) -> StoreView: ...

    def ingest_loaded(
        self,
        documents: Sequence[LoadedDocument],
        metadata: dict[str, Any] | ChunkMetadata | None = None,
        *,
        update_index: bool = True,
        progress: bool = False,
    ) -> list[IngestResult]: ...

    def delete_document(self, doc_id: str, *, actor: str = ...) -> int: ...

    def bound(self, spaces: Spaces) -> Self:
        """The same memory under another binding (``MemorySystem.bound``)."""
        ...


class _Spaced(Protocol):
    def bound(self, spaces: Spaces) -> Self: ...


_S = TypeVar("_S", bound=_Spaced)


def _for_root(target: _S, root: SourceRoot | None) -> _S:
    """Where a root's files go: its own space when it names one."""
    if root is None or not root.space:
        return target
    return target.bound(Spaces.bound(root.space))


@dataclass
class SyncPlan:
    mode: str  # "paths" (the sensor's change set) or "full" (every file against the store)
    ingest: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    ignored: list[str] = field(
        default_factory=list
    )  # outside every root, or neither here nor known
    files_under_roots: int = 0  # every file: those a root picks and the unsupported
    states: dict[str, int] = field(default_factory=dict)  # full scans only
    # under a root but picked by no root's patterns: not ingested, not an error, listed
    unsupported: list[str] = field(default_factory=list)
    unsupported_by_extension: dict[str, int] = field(default_factory=dict)


@dataclass
class SyncReport:
    documents_added: int = 0
    documents_replaced: int = 0
    documents_unchanged: int = 0
    documents_removed: int = 0
    sessions_skipped: int = 0  # conversations whose last activity is already stored
    turns_stored: int = 0  # the turns of the sessions stored (added or replaced)
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0
    reused_vectors: int = 0
    files_done: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> reason
    seconds: float = 0.0
    # what the redaction step took out of the documents stored, by kind (a Counter: ``add``
    # sums it)
    redactions: Counter[str] = field(default_factory=Counter)
    # the documents stored whole after an opening tag never closed: "path:line: …" each
    warnings: list[str] = field(default_factory=list)

    def add(self, other: SyncReport) -> None:
        """Take in another run's counts (a long import applied file by file)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                mine.update(theirs)
            else:
                setattr(self, f.name, mine + theirs)

    def count(self, result: IngestResult, removed_chunks: int) -> None:
        if result.status == "unchanged":
            self.documents_unchanged += 1
            return
        if result.status == "replaced":
            self.documents_replaced += 1
            self.chunks_removed += removed_chunks
        else:
            self.documents_added += 1
        self.chunks_added += result.chunks
        self.embedded += result.embedded
        self.reused_vectors += result.reused_vectors
        self.redactions.update(result.redactions)
        self.warnings.extend(result.warnings)


def _sha_or_blank(path: Path) -> str:
    """The content hash a failure is recorded under ("" when even reading fails)."""
    try:
        return file_sha256(path)
    except OSError:
        return ""


def _failure_recorded(ledger: Ledger, path: Path) -> bool:
    """True when the ledger already holds this very content's failure (so retrying is moot)."""
    entry = ledger.get(path)
    try:
        return entry is not None and entry.status == FAILED and entry.sha256 == file_sha256(path)
    except OSError:
        return True


def wants_ingest(status: FileStatus, ledger: Ledger) -> bool:
    """New or changed, or failing for a reason the ledger has not recorded for this content
    (unreadable, or never tried): a sync should (re)try it. A recorded parse failure of the
    same bytes is not retried until the file changes."""
    if status.state in PENDING_STATES:
        return True
    return status.state is FileState.FAILED and not _failure_recorded(ledger, status.path)


def plan_sync(
    store: StoreView,
    config: SourcesConfig,
    ledger: Ledger,
    paths: Sequence[str] | None = None,
    deleted: Sequence[str] | None = None,
) -> SyncPlan:
    """Explicit paths when given (either list), else a full scan of every root."""
    found = survey(config)
    files = found.files
    plan = SyncPlan(
        "full" if paths is None and deleted is None else "paths",
        files_under_roots=len(files) + len(found.unsupported),
        unsupported=[str(p) for p in found.unsupported],
        unsupported_by_extension=found.unsupported_by_extension(),
    )
    if plan.mode == "full":
        for sf in files:
            st = file_status(store, sf, ledger)
            plan.states[st.state.value] = plan.states.get(st.state.value, 0) + 1
            if wants_ingest(st, ledger):
                plan.ingest.append(str(sf.path))
        here = {str(f.path) for f in files}
        plan.delete = [p for p in sorted(ledger.files) if p not in here and not Path(p).exists()]
        return plan
    for raw in dict.fromkeys([*(paths or ()), *(deleted or ())]):
        path = absolute(raw)
        if path.is_file():
            (plan.ingest if config.root_for(path) else plan.ignored).append(str(path))
        elif ledger.get(path) or _for_root(store, config.root_for(path)).documents_by_source(
            source_key(path)
        ):
            plan.delete.append(str(path))
        else:
            plan.ignored.append(str(path))
    return plan


def file_metadata(root: SourceRoot, front_matter: dict[str, object]) -> dict[str, Any]:
    """The root's rule for a file: its knowledge_type wins, importance and tags are defaults.

    A file's own importance stays; its tags are kept and the root's added.
    """
    meta: dict[str, Any] = {}
    if root.knowledge_type is not None:
        meta["knowledge_type"] = root.knowledge_type.value
    if root.importance is not None and "importance" not in front_matter:
        meta["importance"] = root.importance
    if root.tags:
        own = front_matter.get("tags")
        if own is None:
            meta["tags"] = list(root.tags)
        elif isinstance(own, list) and all(isinstance(t, str) for t in own):
            meta["tags"] = list(dict.fromkeys([*own, *root.tags]))
        # anything else: leave it to ingest, which names the bad front matter
    return meta


def conversation_metadata(root: SourceRoot, conv: Conversation) -> dict[str, Any]:
    meta = conv.metadata()
    meta["tags"] = list(dict.fromkeys([*meta["tags"], *root.tags]))
    if root.knowledge_type is not None:
        meta["knowledge_type"] = root.knowledge_type.value
    if root.importance is not None:
        meta["importance"] = root.importance
    return meta


def _ingest_file(
    target: SyncTarget, root: SourceRoot, path: Path, ledger: Ledger, report: SyncReport
) -> None:
    try:
        # Read once: the ledger's hash, the front matter and the stored document all
        # come from these bytes.
        loaded = load_file(path, max_bytes=target.settings.ingest.max_file_bytes)
        sha = hashlib.sha256(loaded.raw).hexdigest()
        older = target.store.documents_by_source(loaded.source)
        [result] = target.ingest_loaded(
            [loaded], file_metadata(root, loaded.front_matter), update_index=False
        )
    except InvalidInputError as exc:
        sha = _sha_or_blank(path)
        ledger.record(path, sha, FAILED, error=str(exc))
        report.failed[str(path)] = str(exc)
        return
    report.count(result, sum(d.n_chunks for d in older if d.doc_id != result.doc_id))
    ledger.record(path, sha, OK, sources=[loaded.source])
    report.files_done.append(str(path))


@dataclass(frozen=True)
class _Session:
    conv: Conversation
    loaded: LoadedDocument
    metadata: ChunkMetadata


def _session(root: SourceRoot, path: Path, conv: Conversation) -> _Session:
    """A session as it will be stored, checked: what the store would refuse, refused now."""
    try:
        return _Session(
            conv, conv.to_loaded(), validate_metadata(conversation_metadata(root, conv))
        )
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}, session {conv.session_id!r}: {exc}") from exc


def _not_held_elsewhere(
    config: SourcesConfig, root: SourceRoot, path: Path, ledger: Ledger, sessions: list[_Session]
) -> None:
    """Refuse a session another file of the same space already holds: storing it would
    replace that file's version, and each sync would flip the session between the two."""
    ids = {conversation_source(s.conv): s.conv.session_id for s in sessions}
    for other, entry in sorted(ledger.files.items()):
        shared = sorted(set(ids).intersection(entry.sources))
        if other == str(path) or not shared or not Path(other).exists():
            continue
        held_by = config.root_for(Path(other))
        if held_by is None or held_by.space != root.space:
            continue
        raise InvalidInputError(
            f"{path}: session {ids[shared[0]]!r} is already imported from {other}; a session "
            "is kept by the first file that brought it: remove it from one of the files or "
            "give it another conversation_id or session_id"
        )


def _refuse(ledger: Ledger, path: Path, sha: str, reason: str, report: SyncReport) -> None:
    """Record a file's failure; the documents an earlier version stored stay its own."""
    entry = ledger.get(path)
    ledger.record(path, sha, FAILED, error=reason, sources=entry.sources if entry else [])
    report.failed[str(path)] = reason


def _ingest_conversations(
    target: SyncTarget,
    config: SourcesConfig,
    root: SourceRoot,
    path: Path,
    ledger: Ledger,
    report: SyncReport,
    actor: str,
) -> None:
    sha = _sha_or_blank(path)
    try:
        read = READERS[root.kind](path, target.settings.ingest.read_limits())
        sessions = [_session(root, path, conv) for conv in read]
        _not_held_elsewhere(config, root, path, ledger, sessions)
    except InvalidInputError as exc:
        _refuse(ledger, path, sha, str(exc), report)
        return
    produced: list[str] = []
    errors: list[str] = []
    for session in sessions:
        source = conversation_source(session.conv)
        produced.append(source)
        if is_current(target.store, session.conv):
            report.sessions_skipped += 1
            continue
        older = target.store.documents_by_source(source)
        try:
            [result] = target.ingest_loaded([session.loaded], session.metadata, update_index=False)
        except InvalidInputError as exc:  # checked above; only the store can still refuse
            errors.append(f"{session.conv.session_id}: {exc}")
            continue
        report.count(result, sum(d.n_chunks for d in older if d.doc_id != result.doc_id))
        if result.status != "unchanged":
            report.turns_stored += len(session.conv.messages)
    entry = ledger.get(path)
    for gone in [s for s in (entry.sources if entry else []) if s not in produced]:
        _delete_source(target, gone, report, actor)
    if errors:
        reason = f"{path}: {len(errors)} of {len(sessions)} conversations failed — " + "; ".join(
            errors[:3]
        )
        ledger.record(path, sha, FAILED, error=reason, sources=produced)
        report.failed[str(path)] = reason
        return
    ledger.record(path, sha, OK, sources=produced)
    report.files_done.append(str(path))


def _delete_source(target: SyncTarget, source: str, report: SyncReport, actor: str) -> None:
    for doc in target.store.documents_by_source(source):
        report.chunks_removed += target.delete_document(doc.doc_id, actor=actor)
        report.documents_removed += 1


def apply_sync(
    target: SyncTarget,
    config: SourcesConfig,
    plan: SyncPlan,
    ledger: Ledger,
    *,
    actor: str = "api",
) -> SyncReport:
    """Ingest and delete as planned; files that fail are recorded, the rest go on. A
    document deleted because its file (or conversation) is gone is recorded in the
    history as ``actor``'s (``pipeline``, ``cli``; ``store/history.py``)."""
    started = time.perf_counter()
    report = SyncReport()
    for raw in plan.delete:
        path = Path(raw)
        if path.exists():  # re-created since the plan was made: leave it to the next sync
            continue
        entry = ledger.get(path)
        where = _for_root(target, config.root_for(path))
        for source in entry.sources if entry and entry.sources else [source_key(path)]:
            _delete_source(where, source, report, actor)
        ledger.forget(path)
        report.files_deleted.append(raw)
    for raw in plan.ingest:
        path = Path(raw)
        root = config.root_for(path)
        if root is None or not path.is_file():
            continue
        if root.kind is SourceKind.FILES:
            _ingest_file(_for_root(target, root), root, path, ledger, report)
        else:
            where = _for_root(target, root)
            _ingest_conversations(where, config, root, path, ledger, report, actor)
    report.seconds = time.perf_counter() - started
    return report
