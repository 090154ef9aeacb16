"""Assemble the Definitions from settings; the repository's ``definitions.py`` calls this."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import dagster as dg

from memory_pipeline.alerts import resolve_log_path
from memory_pipeline.config import PipelineSettings, Settings
from memory_pipeline.pipeline import alerts
from memory_pipeline.pipeline.evaluation import assets as evaluation_assets
from memory_pipeline.pipeline.evaluation import checks as evaluation_checks
from memory_pipeline.pipeline.evaluation import jobs as evaluation_jobs
from memory_pipeline.pipeline.evaluation import schedules as evaluation_schedules
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource
from memory_pipeline.pipeline.ingestion import assets as ingestion_assets
from memory_pipeline.pipeline.ingestion import checks as ingestion_checks
from memory_pipeline.pipeline.ingestion import jobs as ingestion_jobs
from memory_pipeline.pipeline.ingestion import sensors as ingestion_sensors
from memory_pipeline.pipeline.maintenance import assets as maintenance_assets
from memory_pipeline.pipeline.maintenance import checks as maintenance_checks
from memory_pipeline.pipeline.maintenance import jobs as maintenance_jobs
from memory_pipeline.pipeline.maintenance import schedules as maintenance_schedules
from memory_pipeline.pipeline.maintenance import sensors as maintenance_sensors
from memory_pipeline.pipeline.resources import KEY_VAR, URL_VAR, MemoryResource, SourcesResource

log = logging.getLogger(__name__)


def build_definitions(env: Mapping[str, str]) -> dg.Definitions:
    """Everything, configured from ``env`` (HYBRID_RAG_* for the memory, MEMORY_PIPELINE_* here)."""
    settings, notice = Settings.from_env(env).settled()
    if notice:
        log.warning(notice)
    pipeline = PipelineSettings.from_env(env)
    return dg.Definitions(
        assets=[*ingestion_assets.ASSETS, *maintenance_assets.ASSETS, *evaluation_assets.ASSETS],
        asset_checks=[
            *ingestion_checks.build_checks(tag_coverage_floor=pipeline.tag_coverage_floor),
            *evaluation_checks.build_checks(margin=pipeline.eval_margin),
            *maintenance_checks.CHECKS,
        ],
        jobs=[*ingestion_jobs.JOBS, *maintenance_jobs.JOBS, *evaluation_jobs.JOBS],
        sensors=[
            ingestion_sensors.source_files_sensor,
            ingestion_sensors.build_pending_index_sensor(pipeline.index_debounce_seconds),
            maintenance_sensors.first_publication_sensor,
            alerts.build_alerts_sensor(
                log_path=resolve_log_path(pipeline.alert_log, settings.index_path),
                webhook_url=pipeline.alert_webhook,
                ui_url=pipeline.ui_url,
            ),
        ],
        schedules=[
            *maintenance_schedules.build_schedules(archive=pipeline.forgetting_archive),
            *evaluation_schedules.SCHEDULES,
        ],
        resources={
            # The URL stays a reference to its variable: Dagster shows the name, not the value.
            "memory": MemoryResource.from_settings(
                settings,
                database_url=dg.EnvVar(URL_VAR) if settings.database_url else None,
                qdrant_api_key=dg.EnvVar(KEY_VAR) if settings.index.qdrant_api_key else None,
            ),
            "sources": SourcesResource(sources_file=pipeline.sources_file),
            "evaluation": EvaluationResource(
                golden_file=pipeline.golden_file, reports_dir=pipeline.eval_dir
            ),
        },
        # Steps share one process: the multiprocess executor starts one per step (DESIGN §4).
        executor=dg.in_process_executor,
    )
