"""A person named in a question: the turns that person said, preferred.

A question about someone in a conversation ("What instruments does Melanie play?") is
mostly answered by what that person said. The turns of a conversation carry their
speaker (``Turn.speaker``), but in a memory of one conversation the speaker's name is in
nearly every turn's index text, so BM25 weighs it next to nothing, and the turns around
the answer (the other person asking "You play any instruments?") rank beside it.

A speaker is *named* when every word of its name (``index.tokenizer.tokenize``) is a word
of the question. The roles that agent sessions and chat exports use as speakers
(``human``, ``assistant``, ``tool``, …) are not names: "which tool did we use" is not a
question about what the tool said.

``score = r̂ · (1 + w · said)``, ``said`` 1 when one of the chunk's turns was said by a
named speaker, else 0; ``r̂`` the relevance on [0, 1] as the memory axis takes it
(``scoring.normalise_relevance``); ``w`` the ``speaker_boost`` setting (``scoring.boosted``). Bounded,
multiplicative (a chunk that does not match the words gains nothing) and never a
filter, like the boost for a time the question names (``memory/when.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from memory_pipeline.index.tokenizer import tokenize
from memory_pipeline.types import Turn

#: Speakers that are roles, not people (what the session and export readers write).
ROLES = frozenset({"human", "user", "assistant", "tool", "system", "developer"})


def speakers_named(query_tokens: Iterable[str], speakers: Iterable[str]) -> frozenset[str]:
    """The speakers (as the turns spell them) whose every word is a word of the query."""
    words = set(query_tokens)
    named = set()
    for speaker in speakers:
        parts = tokenize(speaker)
        if parts and speaker.strip().casefold() not in ROLES and words.issuperset(parts):
            named.add(speaker)
    return frozenset(named)


def said_by(turns: Sequence[Turn], named: Collection[str]) -> float:
    """1.0 when one of ``turns`` was said by a named speaker, else 0.0."""
    return 1.0 if any(t.speaker in named for t in turns) else 0.0
