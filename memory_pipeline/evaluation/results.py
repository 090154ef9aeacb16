"""Named results of an evaluation run, and their JSON form (reports, baselines)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memory_pipeline.errors import InvalidInputError


@dataclass(frozen=True)
class QueryResult:
    query_id: str
    query: str
    metrics: dict[str, float | None]
    ranking: list[str]  # the first 10 documents (or chunks, or turns, as judged)
    authority_rank: int | None = None
    group: str | None = None  # the query's group (a LoCoMo question category)


@dataclass
class VariantResult:
    name: str
    description: str
    summary: dict[str, float]  # mean over queries where defined
    queries: list[QueryResult]
    seconds: float
    notes: list[str] = field(default_factory=list)
    # Means per query group (e.g. LoCoMo's question categories), when queries have one.
    groups: dict[str, dict[str, float]] = field(default_factory=dict)

    def per_query(self) -> dict[str, QueryResult]:
        return {q.query_id: q for q in self.queries}


@dataclass
class EvalRun:
    dataset: str
    model_id: str
    k_values: list[int]
    authority_window: int
    created_at: str
    n_queries: int
    n_documents: int
    n_chunks: int
    primary: str  # the variant that is the system's default configuration
    variants: list[VariantResult]
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def variant(self, name: str | None = None) -> VariantResult:
        wanted = name or self.primary
        for v in self.variants:
            if v.name == wanted:
                return v
        raise InvalidInputError(
            f"no variant {wanted!r} in this run; it has {', '.join(v.name for v in self.variants)}"
        )

    @property
    def headline_k(self) -> int:
        """The k shown in headlines: 10 when measured, else the largest k."""
        return 10 if 10 in self.k_values else max(self.k_values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalRun:
        try:
            variants = [
                VariantResult(
                    name=v["name"],
                    description=v.get("description", ""),
                    summary=dict(v["summary"]),
                    queries=[QueryResult(**q) for q in v.get("queries", [])],
                    seconds=float(v.get("seconds", 0.0)),
                    notes=list(v.get("notes", [])),
                    groups={g: dict(m) for g, m in (v.get("groups") or {}).items()},
                )
                for v in data["variants"]
            ]
            return cls(
                **{k: data[k] for k in _RUN_FIELDS if k in data},
                variants=variants,
            )
        except (KeyError, TypeError) as exc:
            raise InvalidInputError(f"not an evaluation run (missing or bad {exc})") from exc

    @classmethod
    def load(cls, path: Path) -> EvalRun:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"cannot read evaluation run {path}: {exc}") from exc
        return cls.from_dict(data)


_RUN_FIELDS = (
    "dataset",
    "model_id",
    "k_values",
    "authority_window",
    "created_at",
    "n_queries",
    "n_documents",
    "n_chunks",
    "primary",
    "notes",
    "settings",
)
