"""Maintenance jobs: the forgetting batch, and the health checks run on their own."""

import dagster as dg

from memory_pipeline.pipeline.ingestion.assets import (
    documents_and_chunks,
    embeddings,
    search_index,
    source_files,
)
from memory_pipeline.pipeline.maintenance.assets import forgetting_candidates, scrub_report
from memory_pipeline.pipeline.tags import WRITER_TAG

forgetting_job = dg.define_asset_job(
    "forgetting",
    selection=dg.AssetSelection.assets(forgetting_candidates),
    description="Score every chunk on the memory axis. A dry run unless launched with "
    "`ops.forgetting_candidates.config.dry_run: false` (then it archives and removes).",
    tags={WRITER_TAG: "forgetting"},
)

scrub_job = dg.define_asset_job(
    "scrub",
    selection=dg.AssetSelection.assets(scrub_report),
    description="Find the secrets and <private> spans the memory already holds (kind and "
    "place, never a value). A dry run unless launched with "
    "`ops.scrub_report.config.dry_run: false` (then it takes them out of every file).",
    tags={WRITER_TAG: "scrub"},
)

# Checks only: no asset is rematerialized, every check of the memory's assets runs.
health_job = dg.define_asset_job(
    "health_checks",
    selection=dg.AssetSelection.checks_for_assets(
        source_files, documents_and_chunks, embeddings, search_index, scrub_report
    ),
    description="Every asset check of the memory (consistency, vectors, tagging, sources, "
    "no stored secret).",
)

JOBS = [forgetting_job, scrub_job, health_job]
