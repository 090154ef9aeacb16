"""The nightly evaluation; it skips (and says so) while no golden set is configured."""

import dagster as dg

from memory_pipeline.pipeline.evaluation.jobs import evaluation_job
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource

EVALUATION_CRON = "30 2 * * *"  # nightly 02:30


@dg.schedule(
    name="nightly_evaluation",
    cron_schedule=EVALUATION_CRON,
    job=evaluation_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The golden set against the memory, nightly.",
)
def nightly_evaluation(
    context: dg.ScheduleEvaluationContext, evaluation: EvaluationResource
) -> dg.RunRequest | dg.SkipReason:
    golden = evaluation.golden()
    if golden is None:
        return dg.SkipReason(
            f"no golden set at {evaluation.golden_file!r} (set MEMORY_PIPELINE_GOLDEN)"
        )
    return dg.RunRequest(tags={"memory_pipeline/golden": golden.name})


SCHEDULES = [nightly_evaluation]
