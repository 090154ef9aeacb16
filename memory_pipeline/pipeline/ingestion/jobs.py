"""Ingestion jobs: a sync of the source roots, and an index update on its own."""

import dagster as dg

from memory_pipeline.pipeline.ingestion.assets import (
    documents_and_chunks,
    embeddings,
    search_index,
    source_files,
)
from memory_pipeline.pipeline.tags import RETRY_ON_CRASH, WRITER_TAG

ingest_job = dg.define_asset_job(
    "ingest_sources",
    selection=dg.AssetSelection.assets(
        source_files, documents_and_chunks, embeddings, search_index
    ),
    description="Ingest new and changed source files, delete removed ones, publish the index. "
    "Run config `ops.source_files.config.paths` / `deleted` names the files; none: every root.",
    tags={WRITER_TAG: "sources", **RETRY_ON_CRASH},
)

update_index_job = dg.define_asset_job(
    "update_index",
    selection=dg.AssetSelection.assets(embeddings, search_index),
    description="Take chunks the published index lacks (e.g. from the MCP ingest tool) into it.",
    tags={WRITER_TAG: "index", **RETRY_ON_CRASH},
)

JOBS = [ingest_job, update_index_job]
