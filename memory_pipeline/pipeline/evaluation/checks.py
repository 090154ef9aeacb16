"""The regression gate: this evaluation against the last run that passed it."""

import dagster as dg

from memory_pipeline.config import DEFAULT_EVAL_MARGIN
from memory_pipeline.evaluation import regression
from memory_pipeline.pipeline.evaluation.assets import retrieval_eval
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource


def build_checks(*, margin: float = DEFAULT_EVAL_MARGIN) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=retrieval_eval,
        name="eval_regression",
        description=f"nDCG@10 and Recall@10 within {margin} of the last good run.",
    )
    def eval_regression(evaluation: EvaluationResource) -> dg.AssetCheckResult:
        current = evaluation.latest()
        if current is None:
            return dg.AssetCheckResult(passed=True, description="no evaluation run yet")
        baseline = evaluation.baseline()
        failures = regression(current, baseline, margin) if baseline is not None else []
        if not failures:
            evaluation.promote(current)  # the last good run is the next baseline
        return dg.AssetCheckResult(
            passed=not failures,
            severity=dg.AssetCheckSeverity.ERROR,
            description="; ".join(failures)
            or ("first run: it is the baseline" if baseline is None else "no regression"),
            metadata={
                "margin": margin,
                "baseline": baseline.created_at if baseline else "none",
                "failures": len(failures),
            },
        )

    return [eval_regression]
