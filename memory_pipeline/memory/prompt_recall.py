"""Recall per prompt: the few chunks that matter to what the person just asked.

Before each prompt reaches the agent (Claude Code's and Codex's ``UserPromptSubmit``
hook: ``memory-pipeline recall --prompt``), the prompt is searched in the project's
spaces and the chunks that clear a relevance floor are handed over with it, within a
small budget of tokens (``estimate_tokens``), each naming its document, date and
``doc_id#chunk``. Most prompts get nothing:

* a prompt no person typed (a slash command, a scheduled task, a subagent's result or a
  message from another session, which Claude Code hands over wrapped in a tag) and a very
  short one ("yes", "continue") are not searched (``skip_reason``);
* a hit below either floor is not relevant enough (a greeting, "looks good, go on"): its
  dense similarity to the prompt (an inner product of unit vectors, so the floor belongs
  to the embedding model; the default suits the default model) and its BM25 score (the
  prompt's own words in the chunk, the rarer the more). Either alone let through much
  small talk or kept out many answers; docs/recall.md says how the defaults were chosen;
* a chunk this session was already given (by the session-start block, an earlier prompt
  or a search it made) is not given again, nor a chunk of the session's own transcript.

The search is the memory's own hybrid search (``MemorySystem.query``) without the
guaranteed candidates (the session-start block holds them) and without counting an
access (the agent did not ask). This module's top level imports the standard library
only: ``skip_reason`` runs in the hook before anything heavy is loaded.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_pipeline.store.handed import HandedRecord
    from memory_pipeline.system import MemorySystem
    from memory_pipeline.types import SearchHit

#: The added context's size in tokens unless ``HYBRID_RAG_PROMPT_RECALL_BUDGET`` says.
DEFAULT_BUDGET = 400
#: The dense similarity (inner product of unit vectors) a hit needs, for the default model
#: (multilingual-e5-small), and its BM25 score; see docs/recall.md for how they were chosen.
DEFAULT_FLOOR = 0.83
DEFAULT_BM25_FLOOR = 8.0
#: How long the helper that answers prompts waits for one before it exits (seconds).
IDLE_SECONDS = 1800.0
#: The most chunks one prompt gets, and how many hits are looked at to find them.
MAX_CHUNKS = 3
CANDIDATES = 10
#: A prompt shorter than this many words (a CJK character counts half) is not searched.
MIN_WORDS = 3
TEXT_CHARS = 320
TITLE_CHARS = 80
HEADING = "# From the project memory ({spaces})"
INTRO = "Found by memory-pipeline for this prompt (each item: document, date, doc_id#chunk):"

_TAG_OPENING = re.compile(r"\s*<([A-Za-z][\w-]*)(\s[^>]*)?>")
_WORD = re.compile(r"[^\W\d_]+|\d+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def skip_reason(prompt: object) -> str:
    """Why ``prompt`` is not searched at all ("" when it is): not text, a slash command,
    text a tool wrote (Claude Code wraps what no person typed in a tag of its own:
    ``<command-name>``, ``<task-notification>``, ``<local-command-stdout>``, …), or too
    short to say what it is about."""
    if not isinstance(prompt, str) or not prompt.strip():
        return "no prompt"
    text = prompt.strip()
    if text.startswith("/"):
        return "a slash command"
    if _TAG_OPENING.match(text):
        return "not typed by a person (it opens with a tag)"
    cjk = len(_CJK.findall(text))
    words = sum(1 for w in _WORD.findall(text) if not _CJK.match(w)) + cjk / 2
    if words < MIN_WORDS:
        return f"too short (under {MIN_WORDS} words)"
    return ""


def already_given(records: Iterable[HandedRecord]) -> set[tuple[str, int]]:
    """The chunks (doc_id, chunk index) a session was given: the hits of its searches and
    prompts, and the chunks its session-start block named."""
    from memory_pipeline.memory.recall import named_chunks

    given: set[tuple[str, int]] = set()
    for record in records:
        given.update((h.doc_id, h.chunk_index) for h in record.hits)
        if record.block:
            given |= named_chunks(record.block)
    return given


@dataclass(frozen=True)
class PromptRecall:
    """What one prompt gets: the block ("" for nothing), the hits it names, and why it
    is empty when it is."""

    block: str
    hits: tuple[SearchHit, ...] = ()
    why: str = ""


def recall_for_prompt(
    system: MemorySystem,
    prompt: str,
    *,
    handed: Collection[tuple[str, int]] = (),
    session: str | None = None,
    budget: int = DEFAULT_BUDGET,
    floor: float = DEFAULT_FLOOR,
    bm25_floor: float = DEFAULT_BM25_FLOOR,
    now: dt.datetime | None = None,
) -> PromptRecall:
    """The chunks of ``system``'s spaces that clear ``floor`` (dense) and ``bm25_floor``
    for ``prompt``, best first,
    at most ``MAX_CHUNKS`` and ``budget`` tokens, none of ``handed`` ((doc_id, chunk)
    pairs this session was given) and none of session ``session``'s own transcript."""
    from memory_pipeline.metadata import TRANSCRIPT_OF

    skipped = skip_reason(prompt)
    if skipped:
        return PromptRecall("", why=skipped)
    request = replace(
        system.settings.search_request(),
        top_k=CANDIDATES,
        record_access=False,
        guaranteed_candidates_limit=0,
        now=now,
    )
    own = f"{TRANSCRIPT_OF}{session}" if session else None
    chosen: list[SearchHit] = []
    for hit in system.query(prompt, request).hits:
        if not _clears(hit, "dense", floor) or not _clears(hit, "sparse", bm25_floor):
            continue
        if (hit.doc_id, hit.chunk_index) in handed or (own is not None and own in hit.tags):
            continue
        chosen.append(hit)
        if len(chosen) == MAX_CHUNKS:
            break
    if not chosen:
        return PromptRecall("", why="nothing cleared the relevance floor or was new")
    return fitted(system.spaces.describe(), chosen, budget)


def _clears(hit: SearchHit, stage: str, floor: float) -> bool:
    """Whether the hit's ``stage`` score reaches ``floor``; no score (BM25 found none of
    the prompt's words in it) is zero."""
    score = hit.stage_scores.get(stage)
    return (score if isinstance(score, int | float) else 0.0) >= floor


def fitted(spaces: str, hits: Sequence[SearchHit], budget: int) -> PromptRecall:
    """The block of as many of ``hits`` as fit in ``budget`` tokens, in order."""
    from memory_pipeline.memory.recall import Section, fit

    items = tuple(_item(h) for h in hits)
    block = fit([HEADING.format(spaces=spaces)], [Section(INTRO, items)], budget)
    shown = tuple(h for h, item in zip(hits, items, strict=True) if item in block)
    if not block:
        return PromptRecall("", why=f"not one chunk fits in {budget} tokens")
    return PromptRecall(block, shown)


def _item(hit: SearchHit) -> str:
    from memory_pipeline.memory.recall import clip

    day = hit.source_date or hit.created_at.date()
    title = clip(hit.title or hit.doc_id, TITLE_CHARS)
    return (
        f"- {clip(hit.content, TEXT_CHARS)} — {title}, {day.isoformat()} "
        f"({hit.doc_id}#{hit.chunk_index})"
    )
