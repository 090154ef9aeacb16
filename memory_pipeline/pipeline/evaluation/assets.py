"""The evaluation asset: the golden set against the published memory."""

from typing import Any

import dagster as dg
from pydantic import Field

from memory_pipeline.evaluation import DEFAULT_K_VALUES, EvalRun
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource
from memory_pipeline.pipeline.ingestion.assets import search_index
from memory_pipeline.pipeline.resources import MemoryResource

GROUP = "evaluation"


class EvalConfig(dg.Config):
    k_values: list[int] = Field(default_factory=lambda: list(DEFAULT_K_VALUES))
    variants: list[str] | None = None  # default: the system's default configuration only


def summary_metadata(run: EvalRun) -> dict[str, Any]:
    """The primary variant's means as numbers (charted over time), plus what was measured."""
    variant = run.variant()
    metrics = {k.replace("@", "_at_"): round(v, 4) for k, v in sorted(variant.summary.items())}
    return {
        **metrics,
        "variant": variant.name,
        "queries": run.n_queries,
        "documents": run.n_documents,
        "chunks": run.n_chunks,
        "model_id": run.model_id,
        "seconds": round(sum(v.seconds for v in run.variants), 3),
        "notes": dg.MetadataValue.md("\n".join(f"- {n}" for n in run.notes) or "_none_"),
    }


@dg.asset(
    deps=[search_index],
    group_name=GROUP,
    kinds={"python"},
    description="Retrieval quality on the golden set (nDCG, recall, MRR … at k), "
    "for the system's default configuration.",
)
def retrieval_eval(
    context: dg.AssetExecutionContext,
    config: EvalConfig,
    memory: MemoryResource,
    evaluation: EvaluationResource,
) -> dg.MaterializeResult:
    run = evaluation.evaluate(memory.system(), config.k_values, config.variants)
    path = evaluation.save(run)
    context.log.info(f"evaluation run saved to {path}")
    return dg.MaterializeResult(metadata={**summary_metadata(run), "report": str(path)})


ASSETS = [retrieval_eval]
