"""The first start: once an index is published, evaluate it, report what would be forgotten
and what stored secrets a scrub would take out.

``retrieval_eval`` runs nightly and ``forgetting_candidates`` weekly, so a fresh
``make run`` would show both as never materialized (and ``eval_regression`` as
never executed) for up to a week. ``first_publication_sensor`` asks for each one
as soon as ``search_index`` has been materialized and the asset itself never has —
the report after the evaluation run, so the two do not load the model side by
side; a dry-run scrub report (``scrub_report``: no model) is asked for at once. From
then on the schedules take over (the scrub's check runs with the health checks). The run
key names the publishing run, so a first run that failed is asked again after the next
publication, never in a loop.
"""

from __future__ import annotations

import dagster as dg

from memory_pipeline.pipeline.evaluation.jobs import evaluation_job
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource
from memory_pipeline.pipeline.ingestion.sensors import active_runs
from memory_pipeline.pipeline.maintenance.jobs import forgetting_job, scrub_job

INTERVAL_SECONDS = 30
INDEX = dg.AssetKey("search_index")
EVALUATION = dg.AssetKey("retrieval_eval")
FORGETTING = dg.AssetKey("forgetting_candidates")
SCRUB = dg.AssetKey("scrub_report")


@dg.sensor(
    name="first_publication_sensor",
    jobs=[evaluation_job, forgetting_job, scrub_job],
    minimum_interval_seconds=INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After the first index publication: one evaluation of the golden set and one "
    "dry-run forgetting report and one dry-run scrub report, so nothing waits for its "
    "schedule to be seen at all.",
)
def first_publication_sensor(
    context: dg.SensorEvaluationContext, evaluation: EvaluationResource
) -> dg.SensorResult | dg.SkipReason:
    instance = context.instance
    published = instance.get_latest_materialization_event(INDEX)
    if published is None:
        return dg.SkipReason("no index published yet")
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    evaluating = bool(active_runs(instance, [evaluation_job.name]))
    if instance.get_latest_materialization_event(EVALUATION) is not None:
        notes.append("evaluated before")
    elif evaluation.golden() is None:
        notes.append(f"no golden set at {evaluation.golden_file!r} (set MEMORY_PIPELINE_GOLDEN)")
    elif not evaluating:
        evaluating = True
        requests.append(
            dg.RunRequest(
                run_key=f"first-evaluation-{published.run_id}",
                job_name=evaluation_job.name,
                tags={"memory_pipeline/reason": "first index publication"},
            )
        )
    if instance.get_latest_materialization_event(FORGETTING) is not None:
        notes.append("forgetting reported before")
    elif evaluating:  # one model load at a time: the report follows the evaluation
        notes.append("the forgetting report waits for the evaluation run")
    elif not active_runs(instance, [forgetting_job.name]):
        # A report only, whatever the schedule is configured to do.
        report = _first_report(
            "forgetting", forgetting_job.name, "forgetting_candidates", published.run_id
        )
        requests.append(report)
    if instance.get_latest_materialization_event(SCRUB) is not None:
        notes.append("scrub reported before")
    elif not active_runs(instance, [scrub_job.name]):
        requests.append(_first_report("scrub", scrub_job.name, "scrub_report", published.run_id))
    if not requests:
        return dg.SkipReason("; ".join(notes) or "runs asked for earlier are still going")
    context.log.info(
        f"first publication: requesting {', '.join(r.job_name or '' for r in requests)}"
    )
    return dg.SensorResult(run_requests=requests)


def _first_report(name: str, job: str, op: str, published: str) -> dg.RunRequest:
    """One dry-run report by job ``job`` (its op ``op`` told ``dry_run: true``) after the index
    published by run ``published``: its run key makes it once per publication."""
    return dg.RunRequest(
        run_key=f"first-{name}-report-{published}",
        job_name=job,
        run_config={"ops": {op: {"config": {"dry_run": True}}}},
        tags={
            "memory_pipeline/reason": "first index publication",
            "memory_pipeline/dry_run": "true",
        },
    )
