"""The worker-death check of ``make run``'s run launcher, against real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import dagster as dg
import pytest
from dagster._core.events import EngineEventData
from dagster._core.launcher.base import WorkerStatus

from memory_pipeline.pipeline.instance import LAUNCHER
from memory_pipeline.pipeline.launcher import STARTED_PROCESS, LocalRunLauncher


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(overrides={"run_launcher": LAUNCHER}) as inst:
        yield inst


@dg.op
def noop() -> None:
    pass


@dg.job
def a_job() -> None:
    noop()


def started_run(instance: dg.DagsterInstance, pid: int | None) -> dg.DagsterRun:
    run = instance.create_run_for_job(a_job, status=dg.DagsterRunStatus.STARTED)
    if pid is not None:
        instance.report_engine_event(
            f"{STARTED_PROCESS} (pid: {pid}).", run, EngineEventData.in_process(pid)
        )
    return run


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def health(instance: dg.DagsterInstance, run: dg.DagsterRun) -> WorkerStatus:
    launcher = instance.run_launcher
    assert isinstance(launcher, LocalRunLauncher)
    return launcher.check_run_worker_health(run).status


def test_a_live_worker_is_running_and_a_killed_one_has_failed(
    instance: dg.DagsterInstance,
) -> None:
    proc = sleeper()
    try:
        run = started_run(instance, proc.pid)
        assert health(instance, run) is WorkerStatus.RUNNING
        proc.kill()
        deadline = time.monotonic() + 10
        while health(instance, run) is WorkerStatus.RUNNING and time.monotonic() < deadline:
            time.sleep(0.05)  # not reaped yet: a zombie, which counts as dead too
        assert health(instance, run) is WorkerStatus.FAILED
        proc.wait()
        assert health(instance, run) is WorkerStatus.FAILED  # reaped: gone
    finally:
        proc.kill()
        proc.wait()


def test_a_pid_taken_by_a_newer_process_is_not_the_worker(instance: dg.DagsterInstance) -> None:
    proc = sleeper()
    try:
        run = instance.create_run_for_job(a_job, status=dg.DagsterRunStatus.STARTED)
        # The worker recorded this pid long before the process now holding it started.
        from memory_pipeline.pipeline.launcher import worker_health

        assert worker_health(proc.pid, time.time() - 3600).status is WorkerStatus.FAILED
        assert worker_health(proc.pid, time.time()).status is WorkerStatus.RUNNING
        assert health(instance, run) is WorkerStatus.RUNNING  # no pid recorded: not judged
    finally:
        proc.kill()
        proc.wait()


def test_the_run_monitor_marks_a_run_with_a_dead_worker_failed(
    instance: dg.DagsterInstance,
) -> None:
    """Dagster's own monitoring loop, with this launcher, fails the run (no human action)."""
    import logging

    from dagster._daemon.monitoring.run_monitoring import monitor_started_run

    proc = sleeper()
    proc.kill()
    proc.wait()
    run = started_run(instance, proc.pid)
    record = instance.get_run_record_by_id(run.run_id)
    assert record is not None
    monitor_started_run(instance, None, record, logging.getLogger("test"))  # type: ignore[arg-type]
    after = instance.get_run_by_id(run.run_id)
    assert after is not None and after.status is dg.DagsterRunStatus.FAILURE
