"""Golden sets: hand-judged queries against one's own memory, in YAML.

Each query lists its relevant documents (ids, or a mapping id → grade for nDCG),
optionally relevant chunks (``"<doc_id>#<chunk_index>"``; the query is then judged
chunk by chunk), optionally an authority document (the one source that should come
first) and optional filters. See ``eval/golden_queries.example.yaml``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.types import SearchFilters


def _graded(value: Any) -> dict[str, int]:
    """A list of ids (grade 1 each) or a mapping id → grade."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {value: 1}
    if isinstance(value, list | tuple):
        return {str(v): 1 for v in value}
    if isinstance(value, dict):
        out = {}
        for k, g in value.items():
            if isinstance(g, bool) or not isinstance(g, int | float) or g < 0:
                raise ValueError(f"grade of {k!r} must be a number ≥ 0, got {g!r}")
            out[str(k)] = int(g)
        return out
    raise ValueError("give relevant ids as a list, or a mapping of id to grade")


class GoldenFilters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tags: tuple[str, ...] = ()
    knowledge_types: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    source_date_from: dt.date | None = None
    source_date_to: dt.date | None = None

    def to_search(self) -> SearchFilters:
        return SearchFilters(
            tags=self.tags,
            knowledge_types=self.knowledge_types,
            doc_ids=self.doc_ids,
            source_date_from=self.source_date_from,
            source_date_to=self.source_date_to,
        )


class GoldenQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    query: str = Field(min_length=1)
    relevant: dict[str, int] = Field(default_factory=dict)
    relevant_chunks: dict[str, int] = Field(default_factory=dict)
    authority: str | None = None
    filters: GoldenFilters | None = None

    @field_validator("relevant", "relevant_chunks", mode="before")
    @classmethod
    def _grades(cls, value: Any) -> dict[str, int]:
        return _graded(value)

    @field_validator("relevant_chunks")
    @classmethod
    def _chunk_refs(cls, value: dict[str, int]) -> dict[str, int]:
        for ref in value:
            doc, sep, index = ref.rpartition("#")
            if not sep or not doc or not index.isdigit():
                raise ValueError(f"chunk reference {ref!r} must look like '<doc_id>#<chunk_index>'")
        return value

    @property
    def chunk_level(self) -> bool:
        return bool(self.relevant_chunks)

    def qrels(self) -> dict[str, int]:
        """Judgements at the level this query is judged on (chunks or documents)."""
        if self.chunk_level:
            return dict(self.relevant_chunks)
        return dict(self.relevant)

    def search_filters(self) -> SearchFilters | None:
        return self.filters.to_search() if self.filters else None


class GoldenSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "golden"
    description: str = ""
    queries: tuple[GoldenQuery, ...]

    @field_validator("queries")
    @classmethod
    def _unique_ids(cls, value: tuple[GoldenQuery, ...]) -> tuple[GoldenQuery, ...]:
        ids = [q.id for q in value]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"query ids must be unique; repeated: {', '.join(dupes)}")
        if not value:
            raise ValueError("a golden set needs at least one query")
        return value


def load_golden(path: Path) -> GoldenSet:
    """Read and validate a golden set; errors name the file and what to fix."""
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(
            f"golden set {path} does not exist; copy eval/golden_queries.example.yaml "
            "to eval/golden_queries.yaml and fill in your own queries"
        )
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{path}: expected a mapping with a 'queries' list at the top")
    raw.setdefault("name", path.stem)
    try:
        return GoldenSet.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInputError(f"{path}: {problems}") from exc
