"""Sensors: file changes under the source roots, and chunks the published index lacks.

Both are running by default and both only *look* (stat calls, two small queries);
the work happens in the runs they request. Both are adapters: they ask a narrow view
of the store (``MemoryResource.watched()``) and turn a plain answer into Dagster's terms.

* ``source_files_sensor`` scans the roots and asks ``memory_pipeline.sources.watch``
  what the store still lacks (level-based: new, changed, removed files, and files a
  failed or killed run left undone, asked again after a backoff); it turns the answer
  into an ``ingest_sources`` run request naming the files and removals (or a full scan
  past ``MAX_LISTED_PATHS`` files), or a skip reason, and keeps the cursor. While an
  ingest run is queued or running it waits, so the next run takes every change at once.
* ``pending_index_sensor`` watches the store's queue of index changes (chunks
  written by the MCP ``ingest`` tool, deletions, …) and requests ``update_index``
  once the queue has been still for ``debounce_seconds``: a burst of ingests makes
  one run. With nothing queued it still requests one run when the published BM25
  index was built by other token rules than this version's (it rebuilds the index).
  Each tick leaves a mark beside the index (``index.watcher``), so that a command that
  meets chunks not yet indexed says the pipeline takes them in rather than advising
  ``update-index``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from memory_pipeline.config import DEFAULT_INDEX_DEBOUNCE_SECONDS
from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index import watcher
from memory_pipeline.index.versions import read_current
from memory_pipeline.pipeline.ingestion.jobs import ingest_job, update_index_job
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.status import scan
from memory_pipeline.sources.watch import (
    FAILING_AFTER,
    MAX_LISTED_PATHS,
    RETRY_BASE_SECONDS,
    RETRY_MAX_SECONDS,
    backoff_seconds,
    decide,
)

__all__ = [
    "ASKED_AGAIN_TAG",
    "FAILING_AFTER",
    "MAX_LISTED_PATHS",
    "active_runs",
    "backoff_seconds",
    "build_pending_index_sensor",
    "source_files_sensor",
]

SOURCE_INTERVAL_SECONDS = 15
INDEX_INTERVAL_SECONDS = 10
ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]

#: Run tag: how many of the run's files the sensor asks for again (a count of files; a
#: retry of the run by Dagster is counted by Dagster's own ``dagster/retry_number``).
ASKED_AGAIN_TAG = "memory_pipeline/files_asked_again"


def active_runs(instance: dg.DagsterInstance, job_names: Sequence[str]) -> list[str]:
    """Ids of runs of these jobs that are queued or in progress."""
    ids: list[str] = []
    for name in job_names:
        runs = instance.get_runs(filters=dg.RunsFilter(job_name=name, statuses=ACTIVE), limit=5)
        ids.extend(r.run_id for r in runs)
    return ids


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
    answer = decide(memory.watched(), cfg, scan(cfg), context.cursor, time.time())
    if answer.warning:
        context.log.warning(answer.warning)
    ask = answer.request
    if ask is None:
        return dg.SensorResult(skip_reason=answer.message, cursor=answer.cursor)
    op_config: dict[str, object] = (
        {}  # a full scan: the plan is made against the store
        if ask.full_scan
        else {"paths": ask.paths, "deleted": ask.removals}
    )
    request = dg.RunRequest(
        run_key=ask.run_key,
        run_config={"ops": {"source_files": {"config": op_config}}},
        tags={
            "memory_pipeline/changed": str(ask.changed),
            "memory_pipeline/deleted": str(ask.deleted),
            # Files asked for again after a run that did not bring them in; only when some
            # are, so that a retry Dagster makes of this run (which copies these tags beside
            # its ``dagster/retry_number``) never shows a count of 0 next to its badge.
            **({ASKED_AGAIN_TAG: str(ask.asked_again)} if ask.asked_again else {}),
        },
    )
    context.log.info(answer.message)
    return dg.SensorResult(run_requests=[request], cursor=answer.cursor)


def _stale_token_rules(index_root: Path) -> int | None:
    """The published version when its BM25 terms were made by other token rules."""
    try:
        current = read_current(index_root)
    except IndexUnavailableError:
        return None  # unreadable: the health check reports it; nothing to do here
    if current is None or not current[0].stale_tokens:
        return None
    return current[0].version


def _mark(index_path: Path, debounce_seconds: float) -> None:
    """Leave the mark that tells commands a pipeline watches this index (``watcher``);
    a mark that cannot be written costs only their advice, never the tick."""
    try:
        watcher.mark(index_path, INDEX_INTERVAL_SECONDS, debounce_seconds)
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write the index watch mark: %s", exc)


def build_pending_index_sensor(
    debounce_seconds: float = DEFAULT_INDEX_DEBOUNCE_SECONDS,
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
        store = memory.watched()
        index_path = memory.settings().index_path
        _mark(index_path, debounce_seconds)
        last_seq = store.last_change()
        if not last_seq:
            stale = _stale_token_rules(index_path)
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
