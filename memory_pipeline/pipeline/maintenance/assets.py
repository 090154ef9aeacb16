"""Maintenance assets: the forgetting report (a dry run unless a person asks otherwise)."""

import dagster as dg

from memory_pipeline.pipeline.ingestion.assets import INDEX_POOL
from memory_pipeline.pipeline.resources import MemoryResource

GROUP = "maintenance"


class ForgettingConfig(dg.Config):
    """The forgetting batch's knobs. ``dry_run: false`` archives and removes the candidates."""

    dry_run: bool = True
    score_threshold: float = 0.05
    max_fraction: float = 0.2
    force: bool = False
    time_weight: float | None = None
    freq_weight: float | None = None
    importance_threshold: float | None = None


@dg.asset(
    deps=["chunks"],
    group_name=GROUP,
    kinds={"python"},
    # A real run removes chunks and updates the index: it queues behind other index writers.
    pool=INDEX_POOL,
    description="Chunks the memory axis would forget (importance cut or low memory score). "
    "A dry-run report by default; `dry_run: false` archives them to JSONL and removes them.",
)
def forgetting_candidates(
    context: dg.AssetExecutionContext, config: ForgettingConfig, memory: MemoryResource
) -> dg.MaterializeResult:
    report = memory.system().run_forgetting_batch(
        time_weight=config.time_weight,
        freq_weight=config.freq_weight,
        importance_threshold=config.importance_threshold,
        score_threshold=config.score_threshold,
        dry_run=config.dry_run,
        max_fraction=config.max_fraction,
        force=config.force,
    )
    context.log.info(report.render())
    by_reason: dict[str, int] = {}
    for counts in report.by_type.values():
        for reason, n in counts.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    rows = [
        f"| {'cut' if c.score is None else f'{c.score:.4f}'} | `{c.doc_id}#{c.chunk_index}` "
        f"| {c.knowledge_type or '-'} | {c.reason} | {c.age_days:.0f} | {c.snippet} |"
        for c in report.examples
    ]
    table = "| score | chunk | type | reason | age (days) | text |\n|---|---|---|---|---|---|\n"
    return dg.MaterializeResult(
        metadata={
            "dry_run": report.dry_run,
            "live_chunks": report.live_chunks,
            "candidates": report.candidates,
            "candidate_share": round(report.candidates / report.live_chunks, 4)
            if report.live_chunks
            else 0.0,
            "archived": report.archived,
            "limit": report.limit,
            "refused": report.refused,
            **{f"candidates_{reason}": n for reason, n in sorted(by_reason.items())},
            "by_type": dg.MetadataValue.json(report.by_type),
            "lowest_scoring": dg.MetadataValue.md(table + "\n".join(rows) if rows else "_none_"),
            "index_version": report.index_version if report.index_version is not None else -1,
            "seconds": round(report.timings_s.get("total", 0.0), 3),
        }
    )


ASSETS = [forgetting_candidates]
