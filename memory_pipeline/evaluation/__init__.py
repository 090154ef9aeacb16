"""Retrieval evaluation: golden sets and BEIR data sets, metrics, ablations, reports.

The library side the CLI (``memory-pipeline eval``) and the Dagster ``retrieval_eval``
asset call. Nothing in the core imports this package.
"""

from memory_pipeline.evaluation.compare import Comparison, compare_runs, regression
from memory_pipeline.evaluation.results import EvalRun, QueryResult, VariantResult
from memory_pipeline.evaluation.runner import (
    DEFAULT_K_VALUES,
    EvalQuery,
    ForgettingCost,
    evaluate,
    evaluate_golden,
    evaluate_without,
    forgetting_cost,
)

__all__ = [
    "DEFAULT_K_VALUES",
    "Comparison",
    "EvalQuery",
    "EvalRun",
    "ForgettingCost",
    "QueryResult",
    "VariantResult",
    "compare_runs",
    "evaluate",
    "evaluate_golden",
    "evaluate_without",
    "forgetting_cost",
    "regression",
]
