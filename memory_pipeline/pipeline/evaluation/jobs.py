"""The evaluation job."""

import dagster as dg

from memory_pipeline.pipeline.evaluation.assets import retrieval_eval

evaluation_job = dg.define_asset_job(
    "evaluate_retrieval",
    selection=dg.AssetSelection.assets(retrieval_eval),
    description="Evaluate the golden set against the published memory; gate on regressions.",
)

JOBS = [evaluation_job]
