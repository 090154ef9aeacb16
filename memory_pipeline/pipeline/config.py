"""The pipeline's own settings (beside the core's ``Settings``), read at the composition root."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memory_pipeline.alerts import (
    DEFAULT_UI_URL,
    LOG_ENV,
    UI_URL_ENV,
    WEBHOOK_ENV,
    resolve_log_path,
)
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.pipeline.evaluation.checks import DEFAULT_MARGIN
from memory_pipeline.pipeline.ingestion.checks import DEFAULT_TAG_COVERAGE_FLOOR
from memory_pipeline.pipeline.ingestion.sensors import DEFAULT_DEBOUNCE_SECONDS

SOURCES_ENV = "MEMORY_PIPELINE_SOURCES"
TAG_FLOOR_ENV = "MEMORY_PIPELINE_TAG_COVERAGE_FLOOR"
DEBOUNCE_ENV = "MEMORY_PIPELINE_INDEX_DEBOUNCE_SECONDS"
ARCHIVE_ENV = "MEMORY_PIPELINE_FORGETTING_ARCHIVE"
GOLDEN_ENV = "MEMORY_PIPELINE_GOLDEN"
EVAL_DIR_ENV = "MEMORY_PIPELINE_EVAL_DIR"
MARGIN_ENV = "MEMORY_PIPELINE_EVAL_MARGIN"
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class PipelineSettings:
    sources_file: str | None = None
    tag_coverage_floor: float = DEFAULT_TAG_COVERAGE_FLOOR
    index_debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS
    forgetting_archive: bool = False  # the weekly schedule archives (opt-in), not only reports
    golden_file: str | None = None
    eval_dir: str | None = None  # evaluation runs and the baseline (default: beside the golden set)
    eval_margin: float = DEFAULT_MARGIN
    # Alerts (memory_pipeline/alerts.py). The webhook URL usually holds a secret token:
    # kept out of repr, and never shown in the Dagster UI.
    alert_webhook: str | None = field(default=None, repr=False)
    alert_log: str | None = None  # default: alerts.jsonl beside the index folder
    ui_url: str = DEFAULT_UI_URL  # links in alerts point into this Dagster UI

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PipelineSettings:
        env = os.environ if env is None else env
        return cls(
            sources_file=env.get(SOURCES_ENV) or None,
            tag_coverage_floor=_number(env, TAG_FLOOR_ENV, DEFAULT_TAG_COVERAGE_FLOOR, 0.0, 1.0),
            index_debounce_seconds=_number(env, DEBOUNCE_ENV, DEFAULT_DEBOUNCE_SECONDS, 0.0, None),
            forgetting_archive=env.get(ARCHIVE_ENV, "").strip().lower() in _TRUE,
            golden_file=env.get(GOLDEN_ENV) or None,
            eval_dir=env.get(EVAL_DIR_ENV) or None,
            eval_margin=_number(env, MARGIN_ENV, DEFAULT_MARGIN, 0.0, 1.0),
            alert_webhook=_http_url(env, WEBHOOK_ENV, secret=True),
            alert_log=env.get(LOG_ENV) or None,
            ui_url=_http_url(env, UI_URL_ENV) or DEFAULT_UI_URL,
        )

    def alert_log_path(self, index_path: Path) -> Path:
        """Where alerts are logged: ``alert_log``, else ``alerts.jsonl`` beside the index."""
        return resolve_log_path(self.alert_log, index_path)


def _http_url(env: Mapping[str, str], name: str, *, secret: bool = False) -> str | None:
    raw = env.get(name, "").strip()
    if raw and not raw.lower().startswith(("http://", "https://")):
        shown = "" if secret else f", got {raw!r}"  # a webhook URL may carry its token
        raise InvalidInputError(f"{name} must be an http:// or https:// URL{shown}")
    return raw or None


def _number(
    env: Mapping[str, str], name: str, default: float, low: float, high: float | None
) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise InvalidInputError(f"{name} must be a number, got {raw!r}") from exc
    if value < low or (high is not None and value > high):
        bound = f"[{low:g}, {high:g}]" if high is not None else f"≥ {low:g}"
        raise InvalidInputError(f"{name} must be {bound}, got {value:g}")
    return value
