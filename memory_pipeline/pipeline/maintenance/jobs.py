"""Maintenance jobs: the forgetting batch, and the health checks run on their own."""

import dagster as dg

from memory_pipeline.pipeline.ingestion.assets import (
    documents_and_chunks,
    embeddings,
    search_index,
    source_files,
)
from memory_pipeline.pipeline.maintenance.assets import forgetting_candidates
from memory_pipeline.pipeline.tags import WRITER_TAG

forgetting_job = dg.define_asset_job(
    "forgetting",
    selection=dg.AssetSelection.assets(forgetting_candidates),
    description="Score every chunk on the memory axis. A dry run unless launched with "
    "`ops.forgetting_candidates.config.dry_run: false` (then it archives and removes).",
    tags={WRITER_TAG: "forgetting"},
)

# Checks only: no asset is rematerialized, every check of the ingestion assets runs.
health_job = dg.define_asset_job(
    "health_checks",
    selection=dg.AssetSelection.checks_for_assets(
        source_files, documents_and_chunks, embeddings, search_index
    ),
    description="Every asset check of the memory (consistency, vectors, tagging, sources).",
)

JOBS = [forgetting_job, health_job]
