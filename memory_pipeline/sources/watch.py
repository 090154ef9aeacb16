"""What the source roots still need brought in, tick after tick: the change sensor's logic.

Plain Python, no Dagster: ``decide`` takes the files a scan found, the store (a narrow
read view), the cursor the last tick left and the time, and answers with a ``Decision``
— a run to ask for (files to ingest, removals, a run key) or a reason to wait — and the
cursor to keep. The Dagster sensor (``pipeline/ingestion/sensors.py``) turns that answer
into a ``RunRequest`` or a skip reason.

It is level-based: it asks for what the store still lacks, not only for what changed
since the last tick. Files whose signature (modification time and size) was seen in the
store are not read again; every other file is compared with the store (and the sync
ledger, for removals and recorded parse failures). A run that did not bring its files in
leaves them undone, so a later tick asks again, after a backoff (``RETRY_BASE_SECONDS``
after the first run, doubling up to ``RETRY_MAX_SECONDS``); files asked for
``FAILING_AFTER`` times or more are named as failing. Run keys name the files and the
attempt, so a repeated tick never doubles a run. Past ``MAX_LISTED_PATHS`` files the
answer is a full scan instead of a list.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memory_pipeline.sources.ledger import read_ledger
from memory_pipeline.sources.sources_file import SourcesConfig
from memory_pipeline.sources.status import (
    SourceFile,
    StoreView,
    deleted_statuses,
    file_status,
    plural,
)
from memory_pipeline.sources.sync import wants_ingest

MAX_LISTED_PATHS = 500
MAX_CHECKED = 2000  # files read and compared with the store per tick (the rest: next tick)
REMOVED = "removed"
CURSOR_VERSION = 2
RETRY_BASE_SECONDS = 30
RETRY_MAX_SECONDS = 1800
FAILING_AFTER = 3  # runs that did not bring a file in before it is reported as failing


class WatchedStore(StoreView, Protocol):
    """What the sensors ask of the store: the source files' documents (``StoreView``) and
    the queue of index changes. ``Store`` satisfies it; a sensor is handed nothing more."""

    def last_change(self) -> int:
        """The newest index change's number (0: nothing queued)."""
        ...

    def pending_adds(self) -> list[int]:
        """Live chunks that the published index may not hold yet."""
        ...


def backoff_seconds(attempts: int) -> float:
    """The wait before asking again after ``attempts`` runs did not bring a file in."""
    if attempts <= 0:
        return 0.0
    return float(min(RETRY_BASE_SECONDS * 2 ** (attempts - 1), RETRY_MAX_SECONDS))


@dataclass
class Attempt:
    """A file (or a removal) asked for in a run and not yet seen done."""

    sig: str  # the signature asked for (``REMOVED`` for a removal)
    attempts: int
    at: float  # when the last run was requested

    def due(self, clock: float) -> bool:
        return clock >= self.at + backoff_seconds(self.attempts)


@dataclass
class SourceCursor:
    """``settled``: files whose signature was seen in the store (or whose parse failure is
    recorded); ``asked``: files and removals requested and not yet seen done."""

    settled: dict[str, str] = field(default_factory=dict)
    asked: dict[str, Attempt] = field(default_factory=dict)

    @classmethod
    def load(cls, raw: str | None) -> SourceCursor:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION:
            return cls()  # an older sensor's cursor recorded requests, not the store: re-check
        files = data.get("files")
        asked = data.get("asked")
        out = cls()
        if isinstance(files, dict):
            out.settled = {str(k): str(v) for k, v in files.items()}
        if isinstance(asked, dict):
            for path, a in asked.items():
                try:
                    out.asked[str(path)] = Attempt(
                        str(a["sig"]), int(a["attempts"]), float(a["at"])
                    )
                except (KeyError, TypeError, ValueError):
                    continue
        return out

    def dump(self) -> str:
        return json.dumps(
            {
                "v": CURSOR_VERSION,
                "files": self.settled,
                "asked": {p: vars(a) for p, a in sorted(self.asked.items())},
            },
            sort_keys=True,
        )


@dataclass
class SourceWork:
    """What one tick found: files to ingest and removals to apply, now or after a backoff."""

    ingest: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    waiting: dict[str, float] = field(default_factory=dict)  # path → seconds until retried
    failing: list[str] = field(default_factory=list)  # asked FAILING_AFTER times or more


def source_work(
    store: StoreView,
    cfg: SourcesConfig,
    files: Sequence[SourceFile],
    cursor: SourceCursor,
    clock: float,
) -> SourceWork:
    """Compare the roots with the store (level-based), update ``cursor.settled`` and say
    what a run should do. Files whose signature is settled are not read again."""
    ledger = read_ledger(cfg.state_path)
    now = {str(f.path): f for f in files}
    for path in [p for p in cursor.settled if p not in now]:
        del cursor.settled[path]
    wanted: dict[str, str] = {}  # path → signature (or REMOVED) still to be brought in
    checked = 0
    for path, sf in now.items():
        if cursor.settled.get(path) == sf.signature:
            continue
        if checked >= MAX_CHECKED and path in cursor.asked:
            continue  # verified on a later tick; a file never asked for is asked for now
        checked += 1
        status = file_status(store, sf, ledger)
        if wants_ingest(status, ledger):
            wanted[path] = sf.signature
        else:  # in the store as it is now, or its parse failure is recorded
            cursor.settled[path] = sf.signature
            cursor.asked.pop(path, None)
    for gone in deleted_statuses(store, cfg, ledger, [f.path for f in files]):
        wanted[str(gone.path)] = REMOVED
    for path in sorted(ledger.failures()):
        # Gone with nothing stored, but its parse failure recorded: a removal run clears
        # the record, and that run's checks announce the recovery (else only the next
        # scheduled health check would).
        if path not in now and path not in wanted and not Path(path).exists():
            wanted[path] = REMOVED
    for path in [p for p in cursor.asked if p not in wanted and p not in now]:
        del cursor.asked[path]  # a removal done, or a file gone before it was ingested
    work = SourceWork()
    for path, sig in sorted(wanted.items()):
        asked = cursor.asked.get(path)
        if asked is not None and asked.sig != sig:
            del cursor.asked[path]  # changed again since it was asked for: a fresh start
            asked = None
        if asked is not None and asked.attempts >= FAILING_AFTER:
            work.failing.append(path)
        if asked is not None and not asked.due(clock):
            work.waiting[path] = asked.at + backoff_seconds(asked.attempts) - clock
        else:
            (work.delete if sig == REMOVED else work.ingest).append(path)
    return work


@dataclass(frozen=True)
class IngestRequest:
    """One run to ask for: ``paths`` and ``deleted`` name the work, or both are None for a
    full scan (more than ``MAX_LISTED_PATHS`` files: the run plans against the store)."""

    run_key: str
    changed: int  # files to ingest
    deleted: int  # removals to apply
    asked_again: int  # of those, asked for again after a run that did not bring them in
    paths: list[str] | None
    removals: list[str] | None

    @property
    def full_scan(self) -> bool:
        return self.paths is None


@dataclass(frozen=True)
class Decision:
    """One tick's answer: the cursor to keep, and either a run or why there is none."""

    cursor: str
    request: IngestRequest | None = None
    message: str = ""  # the skip reason, or what the request asks for
    warning: str = ""  # files that keep failing, named (empty: none)


def decide(
    store: StoreView,
    cfg: SourcesConfig,
    files: Sequence[SourceFile],
    raw_cursor: str | None,
    clock: float,
) -> Decision:
    """The change sensor's answer for one tick (with no ingest run queued or running)."""
    cursor = SourceCursor.load(raw_cursor)
    work = source_work(store, cfg, files, cursor, clock)
    warning = (
        f"{plural(len(work.failing), 'file')} still not in after {FAILING_AFTER} or more runs: "
        f"{names(work.failing)}"
        if work.failing
        else ""
    )
    failing = f"; {warning}" if warning else ""
    todo = [*work.ingest, *work.delete]
    if not todo:
        if work.waiting:
            soonest = min(work.waiting.values())
            message = (
                f"{plural(len(work.waiting), 'file')} not in the store after a run "
                f"({names(sorted(work.waiting))}); asking again in {soonest:.0f}s{failing}"
            )
        else:
            message = (
                f"every one of {len(files)} files under {len(cfg.roots)} roots is in the store"
            )
        return Decision(cursor=cursor.dump(), message=message, warning=warning)
    signatures = {str(f.path): f.signature for f in files}
    for path in todo:
        before = cursor.asked.get(path)
        sig = signatures.get(path, REMOVED)
        cursor.asked[path] = Attempt(sig, (before.attempts if before else 0) + 1, clock)
    retries = sum(cursor.asked[p].attempts > 1 for p in todo)
    listed = len(todo) <= MAX_LISTED_PATHS
    request = IngestRequest(
        run_key=run_key(todo, cursor),
        changed=len(work.ingest),
        deleted=len(work.delete),
        asked_again=retries,
        paths=work.ingest if listed else None,
        removals=work.delete if listed else None,
    )
    message = (
        f"requesting ingest of {plural(len(work.ingest), 'file')}, removal of {len(work.delete)}"
        + (f" ({retries} asked again after a run that did not bring them in)" if retries else "")
        + failing
    )
    return Decision(cursor=cursor.dump(), request=request, message=message, warning=warning)


def run_key(paths: Sequence[str], cursor: SourceCursor) -> str:
    """Names the files and their attempt: the same request twice has the same key."""
    digest = hashlib.sha256()
    for path in paths:
        a = cursor.asked[path]
        digest.update(f"{path}\0{a.sig}\0{a.attempts}\n".encode())
    return f"sources-{digest.hexdigest()[:16]}"


def names(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(Path(p).name for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
