"""Schedules: their run requests, and the opt-in that turns the forgetting report into archiving."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg

from memory_pipeline.pipeline.definitions import build_definitions
from memory_pipeline.pipeline.maintenance.schedules import build_schedules
from tests.test_pipeline_support import make_corpus

WHEN = dt.datetime(2026, 11, 30, 3, 0, tzinfo=dt.UTC)


def evaluate(schedule: dg.ScheduleDefinition) -> dg.RunRequest:
    with dg.build_schedule_context(scheduled_execution_time=WHEN) as context:
        [request] = schedule.evaluate_tick(context).run_requests or []
    return request


def by_name(schedules: list[dg.ScheduleDefinition]) -> dict[str, dg.ScheduleDefinition]:
    return {s.name: s for s in schedules}


def test_the_weekly_forgetting_report_is_a_dry_run_by_default() -> None:
    schedule = by_name(build_schedules())["weekly_forgetting_report"]
    assert schedule.cron_schedule == "0 3 * * 1" and schedule.job_name == "forgetting"
    assert schedule.default_status is dg.DefaultScheduleStatus.RUNNING
    request = evaluate(schedule)
    assert request.run_config == {"ops": {"forgetting_candidates": {"config": {"dry_run": True}}}}
    assert request.tags["memory_pipeline/dry_run"] == "true"


def test_archiving_on_schedule_needs_the_explicit_opt_in(tmp_path: Path) -> None:
    env = make_corpus(tmp_path).env(MEMORY_PIPELINE_FORGETTING_ARCHIVE="1")
    defs = build_definitions(env)
    schedule = defs.resolve_schedule_def("weekly_forgetting_report")
    request = evaluate(schedule)
    assert request.run_config["ops"]["forgetting_candidates"]["config"] == {"dry_run": False}


def test_hourly_health_checks_run_the_checks_job() -> None:
    schedule = by_name(build_schedules())["hourly_health_checks"]
    assert schedule.cron_schedule == "7 * * * *" and schedule.job_name == "health_checks"
    assert schedule.default_status is dg.DefaultScheduleStatus.RUNNING
    request = evaluate(schedule)
    assert not request.run_config


def test_the_health_job_runs_every_check_and_materializes_nothing(tmp_path: Path) -> None:
    defs = build_definitions(make_corpus(tmp_path).env())
    job = defs.resolve_job_def("health_checks")
    result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral())
    assert result.success
    assert not result.get_asset_materialization_events()
    assert {e.check_name for e in result.get_asset_check_evaluations()} == {
        "sources_parse",
        "sources_ingested",
        "tagging_coverage",
        "vectors_valid",
        "index_consistency",
        "no_stored_secret",
    }
