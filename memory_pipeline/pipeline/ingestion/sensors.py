"""Sensors: file changes under the source roots, and chunks the published index lacks.

Both are running by default and both only *look* (stat calls, two small queries);
the work happens in the runs they request.

* ``source_files_sensor`` compares the roots' files (modification time and size)
  with its cursor and requests an ``ingest_sources`` run whose config names the
  new/changed and removed files. Past ``MAX_LISTED_PATHS`` files it asks for a
  full scan instead of a huge run config. While an ingest run is queued or running
  it waits, leaving the cursor alone, so the next run takes every change at once.
* ``pending_index_sensor`` watches the store's queue of index changes (chunks
  written by the MCP ``ingest`` tool, deletions, …) and requests ``update_index``
  once the queue has been still for ``debounce_seconds``: a burst of ingests makes
  one run. With nothing queued it still requests one run when the published BM25
  index was built by other token rules than this version's (it rebuilds the index).
"""

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from memory_pipeline.errors import IndexError_
from memory_pipeline.index.versions import read_current
from memory_pipeline.pipeline.ingestion.jobs import ingest_job, update_index_job
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.status import scan

MAX_LISTED_PATHS = 500
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


def _load_cursor(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _run_key(changed: Sequence[str], deleted: Sequence[str], seen: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path in [*changed, *deleted]:
        digest.update(f"{path}\0{seen.get(path, '-')}\n".encode())
    return f"sources-{digest.hexdigest()[:16]}"


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=SOURCE_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="New, changed or removed files under the source roots → an ingest run "
    "with those paths in its run config.",
)
def source_files_sensor(
    context: dg.SensorEvaluationContext, sources: SourcesResource
) -> dg.SensorResult | dg.SkipReason:
    cfg = sources.config()
    if cfg is None:
        return dg.SkipReason("no sources file configured (set MEMORY_PIPELINE_SOURCES)")
    before = _load_cursor(context.cursor)
    now = {str(f.path): f.signature for f in scan(cfg)}
    changed = sorted(p for p, sig in now.items() if before.get(p) != sig)
    deleted = sorted(p for p in before if p not in now)
    if not changed and not deleted:
        return dg.SkipReason(f"no changes in {len(now)} files under {len(cfg.roots)} roots")
    busy = active_runs(context.instance, [ingest_job.name])
    if busy:
        return dg.SkipReason(
            f"{len(changed)} changed and {len(deleted)} removed files wait for ingest run "
            f"{busy[0]} to finish"
        )
    if len(changed) + len(deleted) > MAX_LISTED_PATHS:
        op_config: dict[str, object] = {}  # a full scan: the plan is made against the store
    else:
        op_config = {"paths": changed, "deleted": deleted}
    request = dg.RunRequest(
        run_key=_run_key(changed, deleted, now),
        run_config={"ops": {"source_files": {"config": op_config}}},
        tags={
            "memory_pipeline/changed": str(len(changed)),
            "memory_pipeline/deleted": str(len(deleted)),
        },
    )
    context.log.info(f"requesting ingest of {len(changed)} files, removal of {len(deleted)}")
    return dg.SensorResult(run_requests=[request], cursor=json.dumps({"files": now}))


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
