"""Runs of small jobs on a real Dagster instance: what the overview's "last runs" shows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from memory_pipeline.pipeline.instance import write_instance


@dg.op
def fine() -> int:
    return 1


@dg.op
def broken() -> int:
    raise RuntimeError("this step fails on purpose")


@dg.job
def tidy_job() -> None:
    fine()


@dg.job
def failing_job() -> None:
    broken()


def run_jobs(home: Path, jobs: Sequence[dg.JobDefinition]) -> list[dg.RunRecord]:
    """Run ``jobs`` in order on the instance at ``home`` (``make run``'s instance file when
    it has none); Dagster's records of its runs, newest first."""
    if not (home / "dagster.yaml").exists():
        write_instance(home)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        for job in jobs:
            job.execute_in_process(instance=instance, raise_on_error=False)
        return list(instance.get_run_records())
    finally:
        instance.dispose()
