"""Metadata accepted at the boundary: validated once, trusted inside."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_pipeline.errors import InvalidInputError


class KnowledgeType(StrEnum):
    """Where knowledge came from decides how it ages (see memory scoring)."""

    PRINCIPLE = "principle"
    PAPER = "paper"
    NEWS = "news"
    EXPERIMENT = "experiment"


class ChunkMetadata(BaseModel):
    """Metadata a caller may attach to a document; every chunk inherits it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    knowledge_type: KnowledgeType | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    tags: tuple[str, ...] = ()
    source_date: dt.date | None = None
    title: str | None = None

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_are_strings(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ValueError('tags must be a list of strings, e.g. ["project:x", "design"]')
        for tag in value:
            if not isinstance(tag, str) or not tag.strip():
                raise ValueError(f"every tag must be a non-empty string; got {tag!r}")
        return tuple(dict.fromkeys(t.strip() for t in value))

    @field_validator("importance", mode="before")
    @classmethod
    def _importance_is_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
            raise ValueError("importance must be a number in [0, 1] or unset")
        return value


def validate_metadata(raw: dict[str, Any] | ChunkMetadata | None) -> ChunkMetadata:
    """Validate caller metadata, raising InvalidInputError that names each bad field."""
    if raw is None:
        return ChunkMetadata()
    if isinstance(raw, ChunkMetadata):
        return raw
    if not isinstance(raw, dict):
        raise InvalidInputError(
            f"metadata must be a mapping of field to value, got {type(raw).__name__}"
        )
    try:
        return ChunkMetadata.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "metadata"
            msg = err["msg"]
            if field == "knowledge_type":
                allowed = ", ".join(k.value for k in KnowledgeType)
                msg = f"unknown knowledge_type {err.get('input')!r}; use one of: {allowed}"
            problems.append(f"{field}: {msg}")
        raise InvalidInputError("invalid metadata — " + "; ".join(problems)) from exc
