"""The forgetting batch: score every live chunk on the memory axis, archive the weakest.

Candidates are chunks cut by importance or whose memory value (``memory_score``
with relevance 0 — the very function the search rerank uses) is below
``score_threshold`` after their grace period; ``scoring.forgetting_verdict`` decides
both. A dry run (the default) only reports. A real run keeps every
chunk live XOR archived at every instant (see ``archive``):

1. commit the run row as ``"pending"``;
2. append one line per candidate to the archive, flush + fsync;
3. one transaction: delete the chunk rows (documents stay, for restore), queue
   ``IndexChange("del")``, mark the run ``"archived"``;
4. ``IndexWriter.update()`` drops them from the index. If that fails, the database
   is still the truth: serving never returns deleted ids.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_pipeline.errors import InvalidInputError, MemoryPipelineError
from memory_pipeline.memory.archive import (
    append_chunks,
    archived_keys,
    iter_archive,
)
from memory_pipeline.memory.restore import RestoreReport, restore_archived
from memory_pipeline.memory.scoring import (
    DEFAULT_GRACE_DAYS,
    DEFAULT_MAX_FRACTION,
    DEFAULT_SCORE_THRESHOLD,
    MemoryFields,
    MemoryParams,
    forgetting_verdict,
)
from memory_pipeline.store import Store, now_utc

if TYPE_CHECKING:
    from memory_pipeline.embedding.base import Embedder
    from memory_pipeline.index.protocols import IndexUpdater

__all__ = [
    "ForgettingRefusedError",
    "ForgettingReport",
    "RestoreReport",
    "archived_keys",
    "iter_archive",
    "restore_archived",
    "run_forgetting_batch",
]

_BATCH = 500  # rows per statement: well below SQLite's bound-parameter cap
_SNIPPET = 100


class ForgettingRefusedError(MemoryPipelineError):
    """A real run would archive more than ``max_fraction`` of the live chunks: ``limit``
    of them at most (what a caller tells its user in its own words)."""

    def __init__(self, message: str, *, limit: int, max_fraction: float) -> None:
        super().__init__(message)
        self.limit = limit
        self.max_fraction = max_fraction


@dataclass(frozen=True)
class Candidate:
    chunk_id: int
    doc_id: str
    chunk_index: int
    knowledge_type: str | None
    score: float | None  # None when cut by importance
    reason: str
    age_days: float
    snippet: str = ""

    def sort_key(self) -> tuple[int, float]:
        return (0, 0.0) if self.score is None else (1, self.score)


@dataclass
class ForgettingReport:
    run_id: str | None
    dry_run: bool
    params: dict[str, Any]
    live_chunks: int
    candidates: int
    archived: int
    limit: int  # most chunks one run may archive without force
    refused: bool  # over the limit (a dry run reports it; a real run raised unless forced)
    by_type: dict[str, dict[str, int]]  # knowledge_type -> reason -> count
    examples: list[Candidate] = field(default_factory=list)
    archive_path: str = ""
    index_version: int | None = None
    index_error: str | None = None
    timings_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        mode = "DRY RUN — nothing changed" if self.dry_run else f"run {self.run_id}"
        share = self.candidates / self.live_chunks if self.live_chunks else 0.0
        p = self.params
        lines = [
            f"forgetting batch ({mode})",
            f"  params: time_weight {p['time_weight']}, freq_weight {p['freq_weight']}, "
            f"importance_threshold {p['importance_threshold']}, score_threshold "
            f"{p['score_threshold']}, grace_days {p['grace_days']}, max_fraction "
            f"{p['max_fraction']}, now {p['now']}",
            f"  {self.candidates} of {self.live_chunks} live chunks are candidates ({share:.1%}; "
            f"limit {self.limit} without force)",
        ]
        if self.refused and self.dry_run:
            lines.append("  over the limit: a real run needs --force (or a lower threshold)")
        elif self.refused:
            lines.append("  over the limit, archived anyway because force was given")
        if not self.dry_run:
            lines.append(f"  archived {self.archived} to {self.archive_path}")
        reasons = sorted({r for counts in self.by_type.values() for r in counts})
        if reasons:
            lines.append("  " + f"{'knowledge_type':<16}" + "".join(f"{r:>28}" for r in reasons))
            for kind, counts in sorted(self.by_type.items()):
                cells = "".join(f"{counts.get(r, 0):>28}" for r in reasons)
                lines.append(f"  {kind:<16}{cells}")
        if self.examples:
            lines.append("  lowest-scoring:")
        for c in self.examples:
            score = "cut" if c.score is None else f"{c.score:.3g}"
            lines.append(
                f"    {score:>9}  {c.doc_id}#{c.chunk_index} ({c.knowledge_type or '-'}, "
                f"{c.age_days:.0f} days)  {c.snippet}"
            )
        if self.index_error:
            lines.append(f"  index not updated ({self.index_error}); run update-index")
        elif self.index_version is not None:
            lines.append(f"  index version {self.index_version}")
        timings = ", ".join(f"{k} {v:.2f}s" for k, v in self.timings_s.items())
        lines.append(f"  timings: {timings}")
        return "\n".join(lines)


def _check(score_threshold: float, max_fraction: float, grace_days: float, examples: int) -> None:
    for name, value in (("score_threshold", score_threshold), ("max_fraction", max_fraction)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InvalidInputError(f"{name} must be a number in [0, 1], got {value!r}")
    if (
        isinstance(grace_days, bool)
        or not isinstance(grace_days, int | float)
        or not 0 <= grace_days < math.inf
    ):
        raise InvalidInputError(f"grace_days must be a number of days ≥ 0, got {grace_days!r}")
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise InvalidInputError(f"examples must be an integer ≥ 0, got {examples!r}")


def score_candidates(
    store: Store,
    params: MemoryParams,
    score_threshold: float,
    now: dt.datetime,
    grace_days: float = DEFAULT_GRACE_DAYS,
) -> tuple[int, list[Candidate]]:
    """One pass over every live chunk's memory columns: (live chunks, candidates)."""
    live = 0
    out: list[Candidate] = []
    for row in store.iter_memory_rows():
        live += 1
        fields = MemoryFields(
            row.knowledge_type,
            row.importance,
            row.access_count,
            row.created_at,
            row.source_date,
            row.last_accessed_at,
        )
        verdict = forgetting_verdict(
            fields, params, now, score_threshold=score_threshold, grace_days=grace_days
        )
        if verdict.reason is None:
            continue
        out.append(
            Candidate(
                row.chunk_id,
                row.doc_id,
                row.chunk_index,
                row.knowledge_type,
                verdict.memory.score,
                verdict.reason.value,
                verdict.memory.age_days,
            )
        )
    return live, out


def _params(params: MemoryParams, **extra: Any) -> dict[str, Any]:
    return {**asdict(params), "half_life_overrides": dict(params.half_life_overrides), **extra}


def run_forgetting_batch(
    store: Store,
    writer: IndexUpdater,
    archive_path: Path,
    embedder: Embedder,
    params: MemoryParams,
    score_threshold: float = DEFAULT_SCORE_THRESHOLD,
    dry_run: bool = True,
    max_fraction: float = DEFAULT_MAX_FRACTION,
    force: bool = False,
    now: dt.datetime | None = None,
    examples: int = 10,
    grace_days: float = DEFAULT_GRACE_DAYS,
    chosen: Collection[int] | None = None,
) -> ForgettingReport:
    """Score every live chunk; a real run archives the candidates and removes them —
    only those of them in ``chosen`` when given (chunk ids a person picked from a dry
    run: one that is no candidate any more, read since, say, is left)."""
    _check(score_threshold, max_fraction, grace_days, examples)
    started = time.perf_counter()
    now = now or now_utc()
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)
    live, candidates = score_candidates(store, params, score_threshold, now, grace_days)
    scored_s = time.perf_counter() - started
    limit = math.floor(max_fraction * live)
    by_type: dict[str, Counter[str]] = {}
    for c in candidates:
        by_type.setdefault(c.knowledge_type or "-", Counter())[c.reason] += 1
    lowest = sorted(candidates, key=Candidate.sort_key)[:examples]
    texts = store.contents([c.chunk_id for c in lowest])
    report = ForgettingReport(
        run_id=None,
        dry_run=dry_run,
        params=_params(
            params,
            score_threshold=score_threshold,
            grace_days=grace_days,
            max_fraction=max_fraction,
            force=force,
            dry_run=dry_run,
            now=now.isoformat(),
            # The space the run acts in (None: every space); restore shows a run only there.
            space=None if store.spaces.read is None else store.spaces.write,
        ),
        live_chunks=live,
        candidates=len(candidates),
        archived=0,
        limit=limit,
        refused=len(candidates) > limit,
        by_type={k: dict(v) for k, v in by_type.items()},
        examples=[
            Candidate(
                **{**asdict(c), "snippet": " ".join(texts.get(c.chunk_id, "").split())[:_SNIPPET]}
            )
            for c in lowest
        ],
        archive_path=str(archive_path),
        timings_s={"score": scored_s},
    )
    if dry_run:
        report.timings_s["total"] = time.perf_counter() - started
        return report
    if chosen is not None:
        picked = set(chosen)
        candidates = [c for c in candidates if c.chunk_id in picked]
        report.params["chosen"] = len(picked)
        report.refused = len(candidates) > limit
    if report.refused and not force:
        raise ForgettingRefusedError(
            f"this run would archive {len(candidates)} of {live} live chunks "
            f"({len(candidates) / live:.1%}), more than max_fraction {max_fraction:.0%} "
            f"allows ({limit}); check the dry-run report, then pass force=True (--force), "
            "raise max_fraction (--max-fraction) or lower score_threshold",
            limit=limit,
            max_fraction=max_fraction,
        )
    report.run_id = f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    _archive_and_delete(store, archive_path, embedder, candidates, report)
    report.timings_s["archive+delete"] = time.perf_counter() - started - scored_s
    index_started = time.perf_counter()
    try:
        report.index_version = writer.update().version
    except (MemoryPipelineError, OSError) as exc:  # the database is the truth; serving copes
        report.index_error = str(exc)
    report.timings_s["index"] = time.perf_counter() - index_started
    report.timings_s["total"] = time.perf_counter() - started
    return report


def _archive_and_delete(
    store: Store,
    archive_path: Path,
    embedder: Embedder,
    candidates: list[Candidate],
    report: ForgettingReport,
) -> None:
    """Steps 1–3 of the module docstring; on return the chunks are archived, not live."""
    assert report.run_id is not None
    run_id = report.run_id
    params_json = json.dumps(report.params, sort_keys=True)
    store.start_forgetting_run(run_id, params_json, len(candidates), now_utc())
    entries = [(c.chunk_id, c.reason, c.score) for c in candidates]
    written = append_chunks(store, archive_path, embedder.model_id, run_id, entries)
    _delete_and_finish(store, run_id, written)
    report.archived = len(written)


def _delete_and_finish(store: Store, run_id: str, ids: list[int]) -> None:
    """One transaction: the chunks go (tags and vectors cascade), the run counts as archived."""
    store.finish_forgetting_run(run_id, ids, now_utc())
