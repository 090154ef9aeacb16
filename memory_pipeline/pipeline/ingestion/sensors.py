"""Sensors: file changes under the source roots, and chunks the published index lacks.

Both are running by default and both only *look* (stat calls, two small queries);
the work happens in the runs they request.

* ``source_files_sensor`` is level-based: it asks for what the store still lacks,
  not only for what changed since its last tick. Files whose signature (modification
  time and size) it has already seen in the store are not read again; every other
  file is compared with the store (and the sync ledger, for removals and recorded
  parse failures), and an ``ingest_sources`` run is requested naming the files and
  removals still to do. A run that failed or was killed leaves them undone, so a
  later tick asks again, after a backoff (30 s after the first run, doubling up to
  30 min), with a count of the files that keep failing in the tick's message. While an ingest run is queued or running
  it waits, so the next run takes every change at once; run keys name the files
  and the attempt, so a tick repeated by Dagster never doubles a run. Past
  ``MAX_LISTED_PATHS`` files it asks for a full scan instead of a huge run config.
* ``pending_index_sensor`` watches the store's queue of index changes (chunks
  written by the MCP ``ingest`` tool, deletions, …) and requests ``update_index``
  once the queue has been still for ``debounce_seconds``: a burst of ingests makes
  one run. With nothing queued it still requests one run when the published BM25
  index was built by other token rules than this version's (it rebuilds the index).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from memory_pipeline.errors import IndexError_
from memory_pipeline.index.versions import read_current
from memory_pipeline.pipeline.ingestion.jobs import ingest_job, update_index_job
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.config import SourcesConfig
from memory_pipeline.sources.ledger import read_ledger
from memory_pipeline.sources.status import (
    SourceFile,
    StoreView,
    deleted_statuses,
    file_status,
    plural,
    scan,
)
from memory_pipeline.sources.sync import wants_ingest

MAX_LISTED_PATHS = 500
MAX_CHECKED = 2000  # files read and compared with the store per tick (the rest: next tick)
REMOVED = "removed"
CURSOR_VERSION = 2
RETRY_BASE_SECONDS = 30
RETRY_MAX_SECONDS = 1800
FAILING_AFTER = 3  # runs that did not bring a file in before it is reported as failing
SOURCE_INTERVAL_SECONDS = 15
INDEX_INTERVAL_SECONDS = 10
DEFAULT_DEBOUNCE_SECONDS = 20
ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def active_runs(instance: dg.DagsterInstance, job_names: Sequence[str]) -> list[str]:
    """Ids of runs of these jobs that are queued or in progress."""
    ids: list[str] = []
    for name in job_names:
        runs = instance.get_runs(filters=dg.RunsFilter(job_name=name, statuses=ACTIVE), limit=5)
        ids.extend(r.run_id for r in runs)
    return ids


@dataclass
class Attempt:
    """A file (or a removal) the sensor asked a run for and has not yet seen done."""

    sig: str  # the signature asked for ("removed" for a removal)
    attempts: int
    at: float  # when the last run was requested

    def due(self, clock: float) -> bool:
        return clock >= self.at + backoff_seconds(self.attempts)


#: Run tag: how many of the run's files the sensor asks for again (a count of files; a
#: retry of the run by Dagster is counted by Dagster's own ``dagster/retry_number``).
ASKED_AGAIN_TAG = "memory_pipeline/files_asked_again"


def backoff_seconds(attempts: int) -> float:
    """The wait before asking again after ``attempts`` runs did not bring a file in."""
    if attempts <= 0:
        return 0.0
    return float(min(RETRY_BASE_SECONDS * 2 ** (attempts - 1), RETRY_MAX_SECONDS))


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


def _run_key(paths: Sequence[str], cursor: SourceCursor) -> str:
    digest = hashlib.sha256()
    for path in paths:
        a = cursor.asked[path]
        digest.update(f"{path}\0{a.sig}\0{a.attempts}\n".encode())
    return f"sources-{digest.hexdigest()[:16]}"


def _names(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(Path(p).name for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=SOURCE_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Files under the source roots that the store does not hold as they are now "
    "(new, changed, removed) → an ingest run naming them. A run that failed or was killed is "
    f"asked again, after a backoff ({RETRY_BASE_SECONDS}s doubling, at most "
    f"{RETRY_MAX_SECONDS // 60} min).",
)
def source_files_sensor(
    context: dg.SensorEvaluationContext, memory: MemoryResource, sources: SourcesResource
) -> dg.SensorResult | dg.SkipReason:
    cfg = sources.config()
    if cfg is None:
        return dg.SkipReason("no sources file configured (set MEMORY_PIPELINE_SOURCES)")
    busy = active_runs(context.instance, [ingest_job.name])
    if busy:  # its files are judged once it is done, not half-way
        return dg.SkipReason(f"waiting for ingest run {busy[0]} to finish")
    files = scan(cfg)
    cursor = SourceCursor.load(context.cursor)
    clock = time.time()
    work = source_work(memory.store(), cfg, files, cursor, clock)
    failing = (
        f"; {plural(len(work.failing), 'file')} still not in after {FAILING_AFTER} or more runs: "
        f"{_names(work.failing)}"
        if work.failing
        else ""
    )
    if failing:
        context.log.warning(failing.lstrip("; "))
    todo = [*work.ingest, *work.delete]
    if not todo:
        if work.waiting:
            soonest = min(work.waiting.values())
            message = (
                f"{plural(len(work.waiting), 'file')} not in the store after a run "
                f"({_names(sorted(work.waiting))}); asking again in {soonest:.0f}s{failing}"
            )
        else:
            message = (
                f"every one of {len(files)} files under {len(cfg.roots)} roots is in the store"
            )
        return dg.SensorResult(skip_reason=message, cursor=cursor.dump())
    signatures = {str(f.path): f.signature for f in files}
    for path in todo:
        before = cursor.asked.get(path)
        sig = signatures.get(path, REMOVED)
        cursor.asked[path] = Attempt(sig, (before.attempts if before else 0) + 1, clock)
    retries = sum(cursor.asked[p].attempts > 1 for p in todo)
    if len(todo) > MAX_LISTED_PATHS:
        op_config: dict[str, object] = {}  # a full scan: the plan is made against the store
    else:
        op_config = {"paths": work.ingest, "deleted": work.delete}
    request = dg.RunRequest(
        run_key=_run_key(todo, cursor),
        run_config={"ops": {"source_files": {"config": op_config}}},
        tags={
            "memory_pipeline/changed": str(len(work.ingest)),
            "memory_pipeline/deleted": str(len(work.delete)),
            # Files asked for again after a run that did not bring them in; only when some
            # are, so that a retry Dagster makes of this run (which copies these tags beside
            # its ``dagster/retry_number``) never shows a count of 0 next to its badge.
            **({ASKED_AGAIN_TAG: str(retries)} if retries else {}),
        },
    )
    context.log.info(
        f"requesting ingest of {plural(len(work.ingest), 'file')}, removal of {len(work.delete)}"
        + (f" ({retries} asked again after a run that did not bring them in)" if retries else "")
        + failing
    )
    return dg.SensorResult(run_requests=[request], cursor=cursor.dump())


def _stale_token_rules(index_root: Path) -> int | None:
    """The published version when its BM25 terms were made by other token rules."""
    try:
        current = read_current(index_root)
    except IndexError_:
        return None  # unreadable: the health check reports it; nothing to do here
    if current is None or not current[0].stale_tokens:
        return None
    return current[0].version


def build_pending_index_sensor(
    debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
) -> dg.SensorDefinition:
    """The index-lag sensor with its quiet period fixed at the composition root."""

    @dg.sensor(
        name="pending_index_sensor",
        job=update_index_job,
        minimum_interval_seconds=INDEX_INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Chunks the published index lacks → one update_index run, once the "
        f"store's change queue has been still for {debounce_seconds:g}s.",
    )
    def pending_index_sensor(
        context: dg.SensorEvaluationContext, memory: MemoryResource
    ) -> dg.SensorResult | dg.SkipReason:
        store = memory.store()
        last_seq = store.last_change()
        if not last_seq:
            stale = _stale_token_rules(memory.settings().index_path)
            if stale is not None and not active_runs(context.instance, [update_index_job.name]):
                # Nothing queued, but the BM25 index was built by other token rules:
                # one update rebuilds it (no re-embedding).
                return dg.SensorResult(
                    run_requests=[
                        dg.RunRequest(
                            run_key=f"update-index-token-rules-{stale}",
                            tags={"memory_pipeline/reason": "token rules changed"},
                        )
                    ],
                    cursor=json.dumps({}),
                )
            return dg.SensorResult(
                skip_reason="the published index holds every chunk", cursor=json.dumps({})
            )
        try:
            seen = json.loads(context.cursor or "{}")
        except ValueError:
            seen = {}
        clock = time.time()
        if seen.get("seq") != last_seq:
            return dg.SensorResult(
                skip_reason=f"index changes up to #{last_seq}; waiting {debounce_seconds:g}s "
                "for the burst to end",
                cursor=json.dumps({"seq": last_seq, "since": clock}),
            )
        quiet = clock - float(seen.get("since", clock))
        if quiet < debounce_seconds:
            return dg.SkipReason(f"queue still for {quiet:.0f}s of {debounce_seconds:g}s")
        busy = active_runs(context.instance, [ingest_job.name, update_index_job.name])
        if busy:
            return dg.SkipReason(f"run {busy[0]} will take the queued changes in")
        pending = len(store.pending_adds())
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"update-index-{last_seq}",
                    tags={"memory_pipeline/pending_chunks": str(pending)},
                )
            ],
            cursor=json.dumps({"seq": last_seq, "since": seen.get("since", clock)}),
        )

    return pending_index_sensor
