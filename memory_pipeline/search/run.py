"""One search in flight: its inputs, what each stage found, and the stage timings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from memory_pipeline.index.protocols import IndexView
from memory_pipeline.ingest.relative_dates import Period
from memory_pipeline.search.params import SearchRequest
from memory_pipeline.types import ChunkRecord, SearchStats

Ranked = list[tuple[int, float]]


class Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000


@dataclass
class Run:
    """One search in flight: its inputs and what each stage has found so far."""

    query: str
    qvec: np.ndarray
    tokens: list[str]
    params: SearchRequest
    allowed: np.ndarray | None
    version: IndexView | None
    stats: SearchStats
    timer: Timer
    # Live chunks the index may not hold yet, read before the version (``_read_index``).
    queued: list[int] = field(default_factory=list)
    dense: Ranked = field(default_factory=list)
    sparse: Ranked = field(default_factory=list)
    # Every candidate scored by both retrievers (convex fusion only); see _complete.
    dense_all: Ranked = field(default_factory=list)
    sparse_all: Ranked = field(default_factory=list)
    # Scores of every queued (not yet indexed) chunk, before the top-N cut.
    unindexed_dense: dict[int, float] = field(default_factory=dict)
    unindexed_sparse: dict[int, float] = field(default_factory=dict)
    fused: Ranked = field(default_factory=list)
    pool: list[ChunkRecord] = field(default_factory=list)
    relevance: dict[int, float] = field(default_factory=dict)
    final: dict[int, float] = field(default_factory=dict)
    extra: dict[int, dict[str, float | int | None]] = field(default_factory=dict)
    # The query's share of the fused score when rewrites were fused with it (fusion.phrasing_weights).
    query_weight: float = 1.0
    # The times the query names (``relative_dates.periods_named``); none: no time stage.
    periods: list[Period] = field(default_factory=list)
