"""The run launcher of ``make run``: Dagster's default one, plus a worker-death check.

``DefaultRunLauncher`` starts each run in a process of the code server, but cannot
tell the run-monitoring daemon whether that process still lives, so a run whose
worker was killed (or whose code server died with it) could stay "started" for
ever and keep its pool slots. This launcher answers the daemon's health check:
the worker's pid is the one the run recorded when it started ("Started process
for run (pid: …)"), and the worker is dead when that process is gone, a zombie,
or a newer process that reused the pid. The daemon then marks the run failed,
which frees its slots (``free_slots_after_run_end_seconds``) and lets the run
retry daemon and the source sensor try again.

Only for one machine: the daemon must see the run workers' processes, as it does
under ``dagster dev``.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.events import DagsterEventType
from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus

from memory_pipeline.pipeline.processes import EXITED, process_state

STARTED_PROCESS = "Started process for run"
#: A process that started this long after the run recorded its pid is another process.
PID_REUSE_SLACK_SECONDS = 5.0


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """The pid the run's worker recorded when it started, and when (the last one wins)."""
    records = instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT)
    for entry in reversed(records):
        event = entry.dagster_event
        if event is None or not (event.message or "").startswith(STARTED_PROCESS):
            continue
        metadata = event.engine_event_data.metadata if event.engine_event_data else {}
        raw = metadata.get("pid")
        text = getattr(raw, "text", raw)
        try:
            return int(str(text)), float(entry.timestamp)
        except (TypeError, ValueError):
            continue
    return None


def worker_health(pid: int, recorded_at: float) -> CheckRunHealthResult:
    state = process_state(pid)
    if state is None:
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run worker (pid {pid}) is gone")
    letter, started = state
    if letter in EXITED:
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run worker (pid {pid}) has exited")
    if started is not None and started > recorded_at + PID_REUSE_SLACK_SECONDS:
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"run worker (pid {pid}) is gone; the pid is another process now"
        )
    return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker (pid {pid}) is running")


class LocalRunLauncher(dg.DefaultRunLauncher):
    """``DefaultRunLauncher`` that tells run monitoring whether a run's worker is alive."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        found = worker_pid(self._instance, run.run_id)
        if found is None:  # not launched through a code server (e.g. in-process): not ours
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no run worker pid recorded")
        return worker_health(*found)
