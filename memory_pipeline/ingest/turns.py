"""Conversations chunked by turn, each turn indexed with what it lacks alone.

A turn is one chunk (one speaker's message); a turn over the token budget is cut into
parts, each knowing the same turn. What a search *returns* is the turn as said. What the
indices hold for it (``NewChunk.index_text``: embedded and BM25-indexed) adds what a turn
read alone lacks:

* when and by whom it was said: ``8 May 2023 — Caroline: …``;
* the absolute dates its relative times mean (``yesterday = 7 May 2023``), resolved
  against its session's date (:mod:`memory_pipeline.ingest.relative_dates`);
* the turns around it (``TurnIndexing.before`` / ``after``: two before, one after),
  clipped, so that an answer ("Yes, twice!") is found by the question it answers.

Its vector is *blended* (``TurnIndexing.blend``): the model embeds each turn once, its own
lines alone (date, speaker, turn, resolved dates), and a turn's vector is its own plus
``NEIGHBOUR_BLEND`` × the mean of its neighbours' own vectors, normalised. Embedding the
whole index text instead (``blend=None``, "joined") reads every turn four times, once as
itself and three times as a neighbour, about 4× the time; on LoCoMo's development split it
finds a little less at the top of the ranking (Recall@5 0.717 against 0.727, MRR 0.536
against 0.565) and a little more at 10 (Recall@10 0.792 against 0.786)
(docs/conversations.md).

BM25 takes the turn's own words twice (``store.rows.SPARSE_TEXT``), so they outweigh a
neighbour's. How many neighbours, and that weighting, were measured on LoCoMo's
development conversations and chosen there (docs/conversations.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memory_pipeline.ingest.chunking import chunk_document
from memory_pipeline.ingest.relative_dates import day_text, resolve_relative_dates
from memory_pipeline.types import Blend, NewChunk, Turn

# A neighbour is context, not content: its first characters say what it was about.
NEIGHBOUR_CHARS = 400
# A blended vector: own + NEIGHBOUR_BLEND × mean(neighbours' own), measured on LoCoMo's
# development conversations and chosen there (docs/conversations.md).
NEIGHBOUR_BLEND = 0.3


@dataclass(frozen=True)
class TurnText:
    """One turn as the chunker takes it."""

    turn_id: str
    speaker: str
    said_at: dt.datetime | None
    text: str


@dataclass(frozen=True)
class TurnIndexing:
    """What a turn's index text carries besides the turn: neighbours and resolved dates."""

    before: int = 2
    after: int = 1
    dates: bool = True
    # The neighbours' weight in a blended vector; None embeds the whole index text.
    blend: float | None = NEIGHBOUR_BLEND

    def neighbours(self, turns: Sequence[TurnText], i: int) -> list[int]:
        """The positions of turn ``i``'s neighbours, in order, itself left out."""
        return [
            j for j in range(max(0, i - self.before), min(len(turns), i + 1 + self.after)) if j != i
        ]


DEFAULT_TURN_INDEXING = TurnIndexing()


def said_on(at: dt.datetime | None) -> str:
    return day_text(at.date()) if at else ""


def _clip(text: str, limit: int | None) -> str:
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " …"
    return text


def _said(speaker: str, text: str) -> str:
    """``Ana said, "…"``: a sentence, which the embedding model reads better than an
    ``Ana: …`` label (measured: docs/conversations.md)."""
    return f'{speaker} said, "{_clip(text, None)}"' if speaker else _clip(text, None)


def _line(turn: TurnText, limit: int | None = None) -> str:
    text = _clip(turn.text, limit)
    return f"{turn.speaker}: {text}" if turn.speaker else text


def own_text(turn: TurnText, part: str, indexing: TurnIndexing) -> str:
    """What (a part of) a turn says alone: when, by whom, and the dates it means."""
    when = said_on(turn.said_at)
    head = _said(turn.speaker, part)
    lines = [f"{when}: {head}" if when else head]
    if indexing.dates and turn.said_at is not None:
        resolved = resolve_relative_dates(part, turn.said_at.date())
        if resolved:
            lines.append("(" + "; ".join(f"{r.phrase} = {r.means}" for r in resolved) + ")")
    return "\n".join(lines)


def index_text(turns: Sequence[TurnText], i: int, own: str, indexing: TurnIndexing) -> str:
    """The text the indices hold for (a part of) turn ``i``, whose ``own_text`` is ``own``."""
    lines = [own]
    # Neighbours as labelled lines, not sentences: the turn stays the one thing "said".
    for j in indexing.neighbours(turns, i):
        label = "before — " if j < i else "after — "
        lines.append(label + _line(turns[j], NEIGHBOUR_CHARS))
    return "\n".join(lines)


def chunk_turns(
    turns: Sequence[TurnText],
    *,
    token_counter: Callable[[str], int],
    max_chunk_size: int,
    indexing: TurnIndexing = DEFAULT_TURN_INDEXING,
) -> list[NewChunk]:
    """One chunk per turn (parts of a turn over ``max_chunk_size`` tokens), in order."""
    chunks: list[NewChunk] = []
    own: list[str] = []  # each chunk's own_text
    parts_of: dict[int, list[int]] = {}  # turn position -> its chunks' positions
    for i, turn in enumerate(turns):
        if not turn.text.strip():
            continue
        ref = (Turn(turn.turn_id, turn.speaker, turn.said_at),)
        text = turn.text.strip()
        n = token_counter(text)  # most turns fit: one count, one chunk
        if isinstance(n, int) and 0 <= n <= max_chunk_size:
            parts = [(text, n)]
        else:
            parts = [
                (c.text, c.token_count)
                for c in chunk_document(
                    text,
                    token_counter=token_counter,
                    max_chunk_size=max_chunk_size,
                    overlap=0,
                    fmt="text",
                )
            ]
        for part, tokens in parts:
            parts_of.setdefault(i, []).append(len(chunks))
            own.append(own_text(turn, part, indexing))
            chunks.append(
                NewChunk(
                    len(chunks),
                    part,
                    tokens,
                    index_text=index_text(turns, i, own[-1], indexing),
                    turns=ref,
                )
            )
    if indexing.blend is None:
        return chunks
    # A chunk blends the own lines of the chunks of the turns around its turn.
    out = list(chunks)
    for i, positions in parts_of.items():
        around = tuple(own[c] for j in indexing.neighbours(turns, i) for c in parts_of.get(j, ()))
        for k in positions:
            out[k] = replace(chunks[k], blend=Blend(own[k], around, indexing.blend))
    return out
