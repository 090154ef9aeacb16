"""Schedules: the weekly forgetting report and the hourly health checks.

The forgetting schedule only ever *reports* unless the composition root opts in
(``archive=True``, from ``MEMORY_PIPELINE_FORGETTING_ARCHIVE=1``): archiving is
otherwise launched by a person, with ``dry_run: false``.
"""

import dagster as dg

from memory_pipeline.pipeline.maintenance.jobs import forgetting_job, health_job

FORGETTING_CRON = "0 3 * * 1"  # Mondays 03:00
HEALTH_CRON = "7 * * * *"  # hourly, off the top of the hour


def build_schedules(*, archive: bool = False) -> list[dg.ScheduleDefinition]:
    forgetting = dg.ScheduleDefinition(
        name="weekly_forgetting_report",
        cron_schedule=FORGETTING_CRON,
        job=forgetting_job,
        run_config={"ops": {"forgetting_candidates": {"config": {"dry_run": not archive}}}},
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Forgetting candidates, weekly: "
        + ("ARCHIVES them (opted in)." if archive else "a dry-run report."),
        tags={"memory_pipeline/dry_run": str(not archive).lower()},
    )
    health = dg.ScheduleDefinition(
        name="hourly_health_checks",
        cron_schedule=HEALTH_CRON,
        job=health_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Every asset check of the memory, hourly.",
    )
    return [forgetting, health]
