"""Spans the memory drops whole: ``<private>…</private>`` and what its own hooks handed over.

``<private>`` is what a person marked as not for the memory. ``<memory-recall>`` fences
what this memory's hooks add to a session's context (``fence``): a transcript records that
context again (Claude Code as entries of its own, other clients as text of a message), and
storing it would store the memory's own chunks a second time (docs/hygiene.md, "No echo").

A span goes with its tags; an opening tag that is never closed drops the rest of the text
it is in (the caller passes one message at a time, so "the rest of that message"). A stray
closing tag is dropped too, so no tag is left to say where something was.
"""

from __future__ import annotations

import re
from collections import Counter

PRIVATE = "private"
RECALLED = "memory-recall"
# tag → the kind its dropped spans are counted as
TAGS = {"private": PRIVATE, "memory-recall": RECALLED}


def fence(block: str) -> str:
    """``block`` as a hook hands it over: fenced, so that a transcript holding it again can
    be recognised in any format and the block dropped before the session is stored."""
    return f"<memory-recall>\n{block.rstrip()}\n</memory-recall>\n"


def _patterns(tag: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    flags = re.IGNORECASE
    return re.compile(rf"<{tag}\s*>", flags), re.compile(rf"</{tag}\s*>", flags)


_PATTERNS = {tag: _patterns(tag) for tag in TAGS}


def _drop(text: str, opening: re.Pattern[str], closing: re.Pattern[str]) -> tuple[str, int]:
    """One tag's spans out of ``text``, reading it once: each opening tag to the next
    closing tag, or (none left) to the end; then any stray closing tag."""
    kept: list[str] = []
    spans = at = 0
    while (start := opening.search(text, at)) is not None:
        kept.append(text[at : start.start()])
        spans += 1
        end = closing.search(text, start.end())
        if end is None:
            at = len(text)
            break
        at = end.end()
    kept.append(text[at:])
    text, stray = closing.subn("", "".join(kept))
    return text, spans + stray


def drop_spans(text: str) -> tuple[str, Counter[str]]:
    """``text`` without its private and recalled spans, and how many of each were dropped."""
    counts: Counter[str] = Counter()
    if "<" not in text:
        return text, counts  # the common case, without a regex pass
    for tag, kind in TAGS.items():
        if tag not in text.lower():
            continue
        text, dropped = _drop(text, *_PATTERNS[tag])
        if dropped:
            counts[kind] += dropped
    return text, counts


def drop_private(text: str) -> tuple[str, int]:
    """``text`` without its ``<private>`` spans, and how many were dropped."""
    kept, counts = drop_spans(text)
    return kept, sum(counts.values())
