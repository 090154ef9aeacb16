"""One search request: everything a search needs besides its text and filters.

Built once (``Settings.search_request``: the settings plus what the caller chose),
checked before it runs, and passed whole to ``HybridSearcher.search``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.search.fusion import DEFAULT_FUSION, DEFAULT_RRF_K, parse_fusion

#: Chunks a search returns unless asked otherwise, and the most a library call may ask for.
DEFAULT_TOP_K = 5
MAX_TOP_K = 1000
#: Candidates each retriever may return before fusion.
MAX_TOP_N = 10_000
#: Guaranteed candidates (principles, important chunks) a search may add.
MAX_GUARANTEED = 1000
#: Relevance's share against novelty in MMR (Carbonell & Goldstein's λ; ``mmr.py``).
DEFAULT_MMR_LAMBDA = 0.7
#: Rewrites one search may take besides the query; each costs a full candidate
#: generation (``phrasings.py``).
MAX_REWRITES = 8
#: How much a speaker the query names lifts that speaker's turns (``memory/who.py``), and
#: the most it may (double). Off by default: on LoCoMo's development conversations 0.1
#: lifted every category's Recall@10 or left it equal, but lowered the adversarial
#: questions' Recall@5 and MRR (they name the wrong person on purpose); docs/conversations.md.
DEFAULT_SPEAKER_BOOST = 0.0
MAX_SPEAKER_BOOST = 1.0


def day_start(day: dt.date) -> dt.datetime:
    """A reference date given as a day (``--now``, the MCP ``now``) as ``SearchRequest.now``:
    its first moment, UTC."""
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


@dataclass(frozen=True)
class SearchRequest:
    """How to search: depth, fusion, the optional stages, the memory axis, the clock."""

    top_k: int = DEFAULT_TOP_K
    top_n: int = 50
    fusion: str = DEFAULT_FUSION
    rrf_k: int = DEFAULT_RRF_K
    enable_mmr: bool = False
    mmr_lambda: float = DEFAULT_MMR_LAMBDA
    use_reranker: bool = True
    rerank_depth: int = 30
    record_access: bool = True
    enable_memory_rerank: bool = False
    memory: MemoryParams = field(default_factory=MemoryParams)
    guaranteed_types: tuple[str, ...] = ("principle",)
    guaranteed_importance_threshold: float = 0.7
    guaranteed_candidates_limit: int = 50
    # A speaker the query names prefers the turns that speaker said: the relevance times
    # (1 + speaker_boost) for them (``memory/who.py``); 0 turns the stage off.
    speaker_boost: float = DEFAULT_SPEAKER_BOOST
    # The reference date: what the memory axis ages chunks to, and what a time the query
    # names ("yesterday", 先月) is read against (None: the clock's).
    now: dt.datetime | None = None

    def validate(self) -> None:
        if self.now is not None and not isinstance(self.now, dt.datetime):
            raise InvalidInputError(f"now must be a date and time or None, got {self.now!r}")
        if not 1 <= self.top_k <= MAX_TOP_K:
            raise InvalidInputError(f"top_k must be between 1 and {MAX_TOP_K}, got {self.top_k}")
        if not 1 <= self.top_n <= MAX_TOP_N:
            raise InvalidInputError(f"top_n must be between 1 and {MAX_TOP_N}, got {self.top_n}")
        parse_fusion(self.fusion)
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidInputError(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda}")
        if not 0.0 <= self.speaker_boost <= MAX_SPEAKER_BOOST:
            raise InvalidInputError(
                f"speaker_boost must be in [0, {MAX_SPEAKER_BOOST}], got {self.speaker_boost}"
            )
        if not 0 <= self.guaranteed_candidates_limit <= MAX_GUARANTEED:
            raise InvalidInputError(
                f"guaranteed_candidates_limit must be in [0, {MAX_GUARANTEED}], got {self.guaranteed_candidates_limit}"
            )
