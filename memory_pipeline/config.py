"""Settings, read from the environment only at an entry point (CLI, server, Dagster)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.embedding.st import DEFAULT_BATCH_SIZE, DEFAULT_MODEL
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.index.dense import DEFAULT_IVF_THRESHOLD
from memory_pipeline.ingest.chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
)
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.search.fusion import parse_fusion
from memory_pipeline.search.params import MAX_GUARANTEED, MAX_TOP_N, SearchParams
from memory_pipeline.store.engine import sqlite_url


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-pipeline" / "models"


_SEARCH = SearchParams()
_MEMORY = MemoryParams()


@dataclass(frozen=True)
class Settings:
    """Every setting with its default; each default is taken from the module that uses it."""

    db_path: Path = Path("hybrid_rag.db")
    index_path: Path = Path("indices")
    archive_path: Path = Path("archive")
    database_url: str | None = None
    model: str = DEFAULT_MODEL
    model_cache: Path = field(default_factory=default_cache_dir)
    reranker: str | None = None
    embed_batch_size: int = DEFAULT_BATCH_SIZE
    max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    top_n: int = _SEARCH.top_n
    fusion: str = _SEARCH.fusion  # one of FUSIONS; see memory_pipeline/search/fusion.py
    rrf_k: int = _SEARCH.rrf_k
    max_file_bytes: int = DEFAULT_MAX_BYTES
    ivf_threshold: int = DEFAULT_IVF_THRESHOLD
    memory_time_weight: float = _MEMORY.time_weight
    memory_freq_weight: float = _MEMORY.freq_weight
    memory_importance_threshold: float = _MEMORY.importance_threshold
    memory_half_life_overrides: tuple[tuple[str, float | None], ...] = ()
    guaranteed_types: tuple[str, ...] = _SEARCH.guaranteed_types
    guaranteed_importance_threshold: float = _SEARCH.guaranteed_importance_threshold
    guaranteed_candidates_limit: int = _SEARCH.guaranteed_candidates_limit

    @property
    def url(self) -> str:
        return self.database_url or sqlite_url(self.db_path.resolve())

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def __post_init__(self) -> None:
        for name, ok, expected in _CHECKS:
            if not ok(self):
                raise SettingsError(name, f"{name} must be {expected}, got {getattr(self, name)!r}")
        try:  # the memory axis checks its own parameters (ranges, their sum, half-lives)
            self.memory_params()
        except InvalidInputError as exc:
            # MemoryParams names the parameter first ("importance_threshold must be …").
            named = "memory_" + str(exc).split(" ", 1)[0]
            if named in _ENV:
                raise SettingsError(named, str(exc)) from exc
            raise SettingsError("memory_half_life_overrides", str(exc)) from exc
        unknown = sorted(set(self.guaranteed_types) - {k.value for k in KnowledgeType})
        if unknown:
            raise SettingsError(
                "guaranteed_types",
                f"guaranteed_types names unknown knowledge types {unknown}; "
                f"use some of: {', '.join(k.value for k in KnowledgeType)}",
            )

    def search_params(self, **per_call: Any) -> SearchParams:
        """Search parameters as configured; ``per_call`` sets the rest (top_k, mmr, …)."""
        configured: dict[str, Any] = {
            "top_n": self.top_n,
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "memory": self.memory_params(),
            "guaranteed_types": self.guaranteed_types,
            "guaranteed_importance_threshold": self.guaranteed_importance_threshold,
            "guaranteed_candidates_limit": self.guaranteed_candidates_limit,
        }
        return SearchParams(**{**configured, **per_call})

    def memory_params(self) -> MemoryParams:
        """The memory axis as configured (callers override per call)."""
        return MemoryParams(
            time_weight=self.memory_time_weight,
            freq_weight=self.memory_freq_weight,
            importance_threshold=self.memory_importance_threshold,
            half_life_overrides=dict(self.memory_half_life_overrides),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from HYBRID_RAG_* variables (the names of the original system).

        An empty variable means unset (the default). A malformed or out-of-range value
        is refused here, at the entry point, with the variable's name.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for key, name in _ENV.items():
            raw = env.get(name, "")
            if raw == "":
                continue
            values[key] = _parse(key, name, raw)
        try:
            return cls(**values)
        except SettingsError as exc:
            raise InvalidInputError(f"{_ENV.get(exc.field, exc.field)}: {exc}") from exc


class SettingsError(InvalidInputError):
    """A setting outside its range; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: Field -> environment variable (the names of the system this one descends from).
_ENV: dict[str, str] = {
    "db_path": "HYBRID_RAG_DB_PATH",
    "index_path": "HYBRID_RAG_INDEX_PATH",
    "archive_path": "HYBRID_RAG_ARCHIVE_PATH",
    "database_url": "HYBRID_RAG_DATABASE_URL",
    "model": "HYBRID_RAG_EMBEDDING_MODEL",
    "model_cache": "HYBRID_RAG_MODEL_CACHE",
    "reranker": "HYBRID_RAG_RERANKER_MODEL",
    "fusion": "HYBRID_RAG_FUSION",
    "embed_batch_size": "HYBRID_RAG_EMBED_BATCH_SIZE",
    "max_chunk_size": "HYBRID_RAG_MAX_CHUNK_SIZE",
    "chunk_overlap": "HYBRID_RAG_CHUNK_OVERLAP",
    "top_n": "HYBRID_RAG_TOP_N",
    "max_file_bytes": "HYBRID_RAG_MAX_FILE_BYTES",
    "rrf_k": "HYBRID_RAG_RRF_K",
    "ivf_threshold": "HYBRID_RAG_IVF_THRESHOLD",
    "memory_time_weight": "HYBRID_RAG_TIME_WEIGHT",
    "memory_freq_weight": "HYBRID_RAG_FREQ_WEIGHT",
    "memory_importance_threshold": "HYBRID_RAG_IMPORTANCE_THRESHOLD",
    "memory_half_life_overrides": "HYBRID_RAG_HALF_LIVES",
    "guaranteed_types": "HYBRID_RAG_GUARANTEED_TYPES",
    "guaranteed_importance_threshold": "HYBRID_RAG_GUARANTEED_IMPORTANCE",
    "guaranteed_candidates_limit": "HYBRID_RAG_GUARANTEED_LIMIT",
}
_FLOATS = {
    "memory_time_weight",
    "memory_freq_weight",
    "memory_importance_threshold",
    "guaranteed_importance_threshold",
}
_INTS = {
    "embed_batch_size",
    "max_chunk_size",
    "chunk_overlap",
    "top_n",
    "rrf_k",
    "max_file_bytes",
    "ivf_threshold",
    "guaranteed_candidates_limit",
}
_PATHS = {"db_path", "index_path", "archive_path", "model_cache"}


def _parse(key: str, name: str, raw: str) -> Any:
    """One variable's value as its field's type, or an error naming the variable."""
    try:
        if key in _INTS:
            return int(raw)
        if key in _FLOATS:
            return float(raw)
    except ValueError as exc:
        kind = "an integer" if key in _INTS else "a number"
        raise InvalidInputError(f"{name} must be {kind}, got {raw!r}") from exc
    if key in _PATHS:
        return Path(raw)
    if key == "fusion":
        return parse_fusion(raw, name).value
    if key == "guaranteed_types":
        return tuple(t.strip() for t in raw.split(",") if t.strip())
    if key == "memory_half_life_overrides":
        return _half_lives(name, raw)
    return raw


def _half_lives(name: str, raw: str) -> tuple[tuple[str, float | None], ...]:
    """``news=14,paper=180,experiment=none``: days per knowledge type (none: never decays)."""
    out: list[tuple[str, float | None]] = []
    for item in (i.strip() for i in raw.split(",") if i.strip()):
        kind, sep, days = item.partition("=")
        try:
            if not sep:
                raise ValueError
            value = None if days.strip().lower() == "none" else float(days)
        except ValueError:
            raise InvalidInputError(
                f"{name}: {item!r} is not <knowledge_type>=<days> (or =none); "
                "e.g. news=14,paper=180"
            ) from None
        out.append((kind.strip(), value))
    return tuple(out)


def _unit(name: str) -> tuple[str, Any, str]:
    return name, lambda s: 0.0 <= getattr(s, name) <= 1.0, "a number in [0, 1]"


# Ranges of the settings; the limits are the ones the using modules enforce.
_CHECKS: tuple[tuple[str, Any, str], ...] = (
    ("embed_batch_size", lambda s: s.embed_batch_size >= 1, "at least 1"),
    (
        "max_chunk_size",
        lambda s: s.max_chunk_size >= MIN_CHUNK_SIZE,
        f"at least {MIN_CHUNK_SIZE} tokens",
    ),
    (
        "chunk_overlap",
        lambda s: 0 <= s.chunk_overlap < s.max_chunk_size / 2,
        "at least 0 and below half of the chunk size (HYBRID_RAG_MAX_CHUNK_SIZE)",
    ),
    ("top_n", lambda s: 1 <= s.top_n <= MAX_TOP_N, f"between 1 and {MAX_TOP_N}"),
    ("rrf_k", lambda s: s.rrf_k >= 0, "at least 0"),
    ("max_file_bytes", lambda s: s.max_file_bytes >= 1, "at least 1"),
    ("ivf_threshold", lambda s: s.ivf_threshold >= 1, "at least 1"),
    _unit("guaranteed_importance_threshold"),
    (
        "guaranteed_candidates_limit",
        lambda s: 0 <= s.guaranteed_candidates_limit <= MAX_GUARANTEED,
        f"between 0 and {MAX_GUARANTEED}",
    ),
)
