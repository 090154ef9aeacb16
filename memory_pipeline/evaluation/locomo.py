"""LoCoMo: long multi-session conversations, judged at the level of single turns.

Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024.
A file in LoCoMo's layout holds samples, each a conversation (``session_<n>`` turn lists
with ``session_<n>_date_time``) and questions whose ``evidence`` names the turns
(``D<session>:<turn>``) that answer them.

Each conversation is stored the way a user's import stores one (one document per session,
chunked by turn, each turn indexed with its context: ``Conversation.to_loaded``), in a
throw-away memory of its own, or all in one memory (``pooled``) searched with the
conversation's tag as a filter. Scoring is by turns: a hit's turns, in order, make the
ranking, so a chunk that holds several turns counts as that many and cannot inflate
Recall@k. Metrics are given overall and per question category, and beside them
session-level Recall@k (``session_recall@k``): a question counts as found at k when a
session holding evidence is among the first k distinct sessions of the ranking.

Each question is searched as of its conversation's last session date (``SearchRequest.now``;
``question_now=False``: the clock's), so a time it names ("last year") is read against
the conversation, not the day the evaluation runs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.evaluation.beir import CachingEmbedder, VectorCache, default_eval_cache
from memory_pipeline.evaluation.beir import embed_queries as embed_all
from memory_pipeline.evaluation.metrics import mean_values
from memory_pipeline.evaluation.results import EvalRun, QueryResult, VariantResult
from memory_pipeline.evaluation.runner import EvalQuery, evaluate
from memory_pipeline.search.params import day_start
from memory_pipeline.sources.conversations import Conversation
from memory_pipeline.sources.transcripts import is_locomo, locomo_conversations
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import SearchFilters

#: LoCoMo's question categories, as its authors' evaluation code names them.
CATEGORIES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
_EVIDENCE = re.compile(r"D\d+:\d+")


@dataclass
class LocomoSet:
    name: str
    sessions: dict[str, list[Conversation]]  # conversation id -> its sessions
    queries: dict[str, list[EvalQuery]]  # conversation id -> its judged questions
    notes: list[str] = field(default_factory=list)

    @property
    def n_queries(self) -> int:
        return sum(len(q) for q in self.queries.values())


def conversation_tag(conversation_id: str) -> str:
    return f"conversation_id:{conversation_id}"


def load_locomo(path: Path) -> LocomoSet:
    """Conversations and their judged questions; evidence that names no turn is dropped
    (and said), a question left with none is not judged."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidInputError(f"cannot read {path} as a LoCoMo JSON file: {exc}") from exc
    if not is_locomo(data):
        raise InvalidInputError(
            f"{path} is not in LoCoMo's layout (a JSON list of samples, each with a "
            "'conversation' object and a 'qa' list)"
        )
    sessions: dict[str, list[Conversation]] = {}
    for conv in locomo_conversations(data, str(path)):
        assert conv.conversation_id is not None
        sessions.setdefault(conv.conversation_id, []).append(conv)
    queries: dict[str, list[EvalQuery]] = {}
    notes: list[str] = []
    dropped = 0
    for i, sample in enumerate(data):
        cid = str(sample.get("sample_id") or f"locomo-{i}")
        session_of = {
            t.turn_id: c.session_id for c in sessions.get(cid, []) for t in c.turn_texts()
        }
        turns = set(session_of)
        for n, qa in enumerate(sample.get("qa") or []):
            question = qa.get("question")
            if not isinstance(question, str) or not question.strip():
                continue
            named = _EVIDENCE.findall(" ".join(str(e) for e in qa.get("evidence") or []))
            found = [e for e in dict.fromkeys(named) if e in turns]
            dropped += len(named) - len(found)
            if not found:
                continue
            category = str(qa.get("category", ""))
            queries.setdefault(cid, []).append(
                EvalQuery(
                    f"{cid}:q{n}",
                    question.strip(),
                    dict.fromkeys(found, 1),
                    filters=SearchFilters(tags=(conversation_tag(cid),)),
                    turn_level=True,
                    group=CATEGORIES.get(category, category or "none"),
                    session_of_turn=session_of,
                )
            )
    if dropped:
        notes.append(f"{dropped} evidence reference(s) name no turn of their conversation")
    return LocomoSet(path.stem, sessions, queries, notes)


def last_session_day(sessions: Sequence[Conversation]) -> dt.datetime | None:
    """A conversation's last session date, as a search's reference date (its first moment)."""
    days = [w.date() for c in sessions if (w := c.last_activity or c.started_at) is not None]
    return day_start(max(days)) if days else None


def _ingest(system: MemorySystem, sessions: Sequence[Conversation]) -> None:
    """What an import does with each session: its document, its metadata, one call."""
    for conv in sessions:
        system.ingest_loaded([conv.to_loaded()], conv.metadata(), update_index=False)


@dataclass
class LocomoMemories:
    """The memories a LoCoMo evaluation searches, built once per run in a temp folder."""

    settings: Settings
    embedder: Embedder
    cache_root: Path
    _tmp: tempfile.TemporaryDirectory[str] = field(init=False)
    built_seconds: float = 0.0
    embedded: int = 0

    def __post_init__(self) -> None:
        self.cache_root.mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.TemporaryDirectory(prefix="locomo-")

    def build(self, name: str, sessions: Sequence[Conversation]) -> MemorySystem:
        started = time.perf_counter()
        where = Path(self._tmp.name) / name
        where.mkdir(parents=True)
        local = self.settings.replace(
            db_path=where / "memory.db", index_path=where / "index", database_url=None
        )
        cache = VectorCache(self.cache_root, self.embedder.model_id)
        builder = MemorySystem(local, embedder=CachingEmbedder(self.embedder, cache))
        try:
            _ingest(builder, sessions)
            self.embedded += builder.embedder.fresh  # type: ignore[attr-defined]
        finally:
            builder.close()
            cache.close()
        system = MemorySystem(local, embedder=self.embedder)
        system.update_index()
        self.built_seconds += time.perf_counter() - started
        return system

    def close(self) -> None:
        self._tmp.cleanup()


def merge_runs(runs: Sequence[EvalRun], dataset: str) -> EvalRun:
    """Several conversations' runs as one: per-query results joined, means taken again
    over all questions (question-averaged, as if one run had asked them all)."""
    first = runs[0]
    names = [v.name for v in first.variants]
    variants = []
    for name in names:
        parts = [r.variant(name) for r in runs]
        queries = [q for p in parts for q in p.queries]
        variants.append(
            VariantResult(
                name,
                parts[0].description,
                mean_of(queries),
                queries,
                sum(p.seconds for p in parts),
                groups=group_means(queries),
            )
        )
    return EvalRun(
        dataset=dataset,
        model_id=first.model_id,
        k_values=first.k_values,
        authority_window=first.authority_window,
        created_at=first.created_at,
        n_queries=sum(r.n_queries for r in runs),
        n_documents=sum(r.n_documents for r in runs),
        n_chunks=sum(r.n_chunks for r in runs),
        primary=first.primary,
        variants=variants,
        notes=list(dict.fromkeys(n for r in runs for n in r.notes)),
        settings=dict(first.settings),
    )


def mean_of(queries: Sequence[QueryResult]) -> dict[str, float]:
    out = mean_values(q.metrics for q in queries)
    out["queries_judged"] = float(sum(1 for q in queries if q.metrics.get("mrr") is not None))
    return out


def group_means(queries: Sequence[QueryResult]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[QueryResult]] = {}
    for q in queries:
        if q.group is not None:
            groups.setdefault(q.group, []).append(q)
    return {g: mean_of(qs) for g, qs in sorted(groups.items())}


def evaluate_locomo(
    ds: LocomoSet,
    embedder: Embedder,
    settings: Settings,
    *,
    variants: Sequence[str] | None = None,
    k_values: Sequence[int] = (1, 3, 5, 10),
    pooled: bool = False,
    cache_root: Path | None = None,
    progress: bool = False,
    question_now: bool = True,
) -> EvalRun:
    """Every question of ``ds`` against its conversation's memory (or the pooled one),
    each as of its conversation's last session date unless ``question_now`` is False."""
    if not ds.n_queries:
        raise InvalidInputError(f"{ds.name}: no question names a turn of its conversation")
    if question_now:
        ds = LocomoSet(
            ds.name,
            ds.sessions,
            {
                cid: [replace(q, now=last_session_day(ds.sessions.get(cid, []))) for q in qs]
                for cid, qs in ds.queries.items()
            },
            ds.notes,
        )
    memories = LocomoMemories(settings, embedder, cache_root or default_eval_cache())
    runs: list[EvalRun] = []
    try:
        groups: list[tuple[str, list[Conversation], list[EvalQuery]]]
        if pooled:
            every = [c for cid in ds.sessions for c in ds.sessions[cid]]
            asked = [q for cid in ds.sessions for q in ds.queries.get(cid, [])]
            groups = [("pooled", every, asked)]
        else:
            groups = [(cid, ds.sessions[cid], ds.queries.get(cid, [])) for cid in ds.sessions]
        for name, sessions, queries in groups:
            if not queries:
                continue
            system = memories.build(name, sessions)
            try:
                vectors = embed_all(embedder, [q.text for q in queries])
                runs.append(
                    evaluate(
                        system,
                        queries,
                        dataset=f"{ds.name}:{name}",
                        k_values=k_values,
                        variants=variants,
                        query_vectors=vectors,
                        progress=progress,
                    )
                )
            finally:
                system.close()
    finally:
        memories.close()
    run = merge_runs(runs, ds.name + (" (pooled)" if pooled else ""))
    run.notes.extend(ds.notes)
    ingest = settings.ingest
    run.settings.update(
        {
            "memories": "pooled" if pooled else "per conversation",
            "turn_context_before": ingest.turn_context_before,
            "turn_context_after": ingest.turn_context_after,
            "turn_dates": ingest.turn_dates,
            "turn_vectors": ingest.turn_vectors,
            "question_now": "last session date" if question_now else "clock",
            "build_seconds": round(memories.built_seconds, 1),
            "embedded": memories.embedded,
        }
    )
    return run


def category_table(run: EvalRun, ks: Sequence[int] = (5, 10)) -> str:
    """The primary variant's metrics per question category, as a Markdown table:
    turn-level and session-level Recall@k side by side for each k."""
    v = run.variant()
    recalls = [m for k in ks for m in (f"recall@{k}", f"session_recall@{k}")]
    head = ["category", "questions", *recalls, "ndcg@10", "mrr"]
    rows = [head, ["---"] * len(head)]
    counts: dict[str, int] = {}
    for q in v.queries:
        if q.group is not None:
            counts[q.group] = counts.get(q.group, 0) + 1
    order = [c for c in CATEGORIES.values() if c in v.groups] + [
        g for g in v.groups if g not in CATEGORIES.values()
    ]
    for g in [*order, "all"]:
        means: dict[str, Any] = v.summary if g == "all" else v.groups[g]
        n = len(v.queries) if g == "all" else counts.get(g, 0)
        rows.append([g, str(n), *(f"{means.get(m, float('nan')):.3f}" for m in head[2:])])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)
