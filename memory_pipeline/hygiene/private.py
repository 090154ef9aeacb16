"""Spans the memory drops whole: ``<private>…</private>`` and what its own hooks handed over.

``<private>`` is what a person marked as not for the memory. ``<memory-recall>`` fences
what this memory's hooks add to a session's context (``fence``): a transcript records that
context again (Claude Code as entries of its own, other clients as text of a message), and
storing it would store the memory's own chunks a second time (docs/hygiene.md, "No echo").

A span goes with its tags. An opening tag that is never closed is read by what the text is:

* one message (a turn of a conversation, a query, a title): it drops the rest of that
  message, the safe reading of what a person typed; a stray closing tag is dropped too;
* a document (a file, a note, a sync): it drops nothing. The document is kept whole and
  the tag is reported (``Unclosed``, with its line) for the caller to warn about: a text
  that only mentions the tag must not lose everything after it. A stray closing tag is
  kept as text.

A tag written as code is prose, not a tag, in any text: inside an inline code span
(```<private>```, also with two or more backticks) or a fenced code block (`````` ``` `````` or
``~~~``). Code must be closed to count: a backtick with no partner is a backtick, and a fence
never closed (the end of a message, a stored chunk cut inside a block) hides no tag. The
text is read once: the code spans and the tags are each found in one pass.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

PRIVATE = "private"
RECALLED = "memory-recall"
# tag → the kind its dropped spans are counted as
TAGS = {"private": PRIVATE, "memory-recall": RECALLED}
# Counted beside them, though nothing is taken: a document stored whole after an opening
# tag it never closes (``memory-pipeline stats`` shows it apart from what was taken).
UNCLOSED = "unclosed-tag"


def fence(block: str) -> str:
    """``block`` as a hook hands it over: fenced, so that a transcript holding it again can
    be recognised in any format and the block dropped before the session is stored."""
    return f"<memory-recall>\n{block.rstrip()}\n</memory-recall>\n"


# A literal name, then a bounded character class: linear.
_TAG = re.compile(r"<(/?)(private|memory-recall)\s*>", re.IGNORECASE)
_TICKS = re.compile(r"`+")
# A fence line: its run of three or more backticks or tildes, and what follows the run.
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")


@dataclass(frozen=True, slots=True)
class Unclosed:
    """An opening tag a document never closes, kept as text: its kind, line (1-based, in
    the text given) and offset."""

    kind: str
    line: int
    offset: int


class Dropped(NamedTuple):
    text: str
    counts: Counter[str]  # spans dropped, by kind
    unclosed: tuple[Unclosed, ...]  # a document's opening tags never closed (kept)


def _inline_code(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """The code spans of one paragraph, ``text[start:end]``: a run of backticks to the next
    run of the same length (CommonMark); a run with none is a literal backtick. Each run's
    next of the same length is found in one backward pass, so this is linear."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text, start, end)]
    following: list[int | None] = [None] * len(runs)
    last: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        size = runs[i][1] - runs[i][0]
        following[i] = last.get(size)
        last[size] = i
    i = 0
    while i < len(runs):
        j = following[i]
        if j is None:
            i += 1
            continue
        out.append((runs[i][0], runs[j][1]))
        i = j + 1


def _lines(text: str) -> list[tuple[int, int, str, int, bool]]:
    """Each line's start and end, and for a fence line its character, its run's length and
    whether nothing follows the run (a line that may close a block)."""
    out = []
    at = 0
    while True:
        nl = text.find("\n", at)
        end = len(text) if nl < 0 else nl
        m = _FENCE.match(text, at, end)
        char, size, bare = "", 0, False
        # a backtick fence's info string holds no backtick (else the line is inline code)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            char, size, bare = m.group(1)[0], len(m.group(1)), not m.group(2).strip()
        out.append((at, end, char, size, bare))
        if nl < 0:
            return out
        at = nl + 1


def code_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds code, as sorted ``(start, end)`` offsets: closed fenced blocks
    and the inline code spans of the paragraphs between them (a span does not cross a blank
    line). Unlike CommonMark, a fence never closed is not code but a line of text, so it
    cannot hide the tags after it. Whether a fence closes is known before it is read (the
    longest closing line of each character further on), so each line is read once."""
    lines = _lines(text)
    # the longest bare fence of each character after each line
    longest = {"`": [0] * (len(lines) + 1), "~": [0] * (len(lines) + 1)}
    for i in range(len(lines) - 1, -1, -1):
        for after in longest.values():
            after[i] = after[i + 1]
        _start, _end, char, size, bare = lines[i]
        if char and bare:
            longest[char][i] = max(longest[char][i], size)
    out: list[tuple[int, int]] = []
    para = 0  # where the current paragraph began
    i = 0
    while i < len(lines):
        start, end, char, size, _bare = lines[i]
        if char and longest[char][i + 1] >= size:  # a fence that is closed further on
            _inline_code(text, para, start, out)
            j = i + 1
            while not (lines[j][2] == char and lines[j][3] >= size and lines[j][4]):
                j += 1
            out.append((start, lines[j][1]))
            para, i = lines[j][1], j + 1
            continue
        if start == end or not text[start:end].strip():
            _inline_code(text, para, start, out)
            para = end
        i += 1
    _inline_code(text, para, len(text), out)
    return out


def _tags(text: str) -> list[re.Match[str]]:
    """The tags of ``text`` that are not written as code."""
    found = list(_TAG.finditer(text))
    if not found or ("`" not in text and "~~~" not in text):
        return found
    code = code_spans(text)
    kept, k = [], 0
    for m in found:
        while k < len(code) and code[k][1] <= m.start():
            k += 1
        if k < len(code) and code[k][0] <= m.start():
            continue
        kept.append(m)
    return kept


def closing_kinds(text: str) -> frozenset[str]:
    """The kinds whose closing tag ``text`` holds (not as code)."""
    if "</" not in text:
        return frozenset()
    return frozenset(TAGS[m.group(2).lower()] for m in _tags(text) if m.group(1))


def drop_spans(text: str, *, document: bool = False) -> Dropped:
    """``text`` without its private and recalled spans, how many of each were dropped, and
    (``document=True``) the opening tags it never closes, kept. Without ``document`` the
    text is one message: such a tag drops the rest of it."""
    counts: Counter[str] = Counter()
    lowered = text.lower() if "<" in text else ""
    if not any(tag in lowered for tag in TAGS):
        return Dropped(text, counts, ())  # the common case, without a pass
    tags = _tags(text)
    last_close: dict[str, int] = {}
    for m in tags:
        if m.group(1):
            last_close[m.group(2).lower()] = m.start()
    kept: list[str] = []
    unclosed: list[Unclosed] = []
    at = 0
    open_tag = ""  # the tag of the span being dropped
    line, counted = 1, 0  # the line at offset ``counted``, counted on as tags are met
    for m in tags:
        closing, tag = bool(m.group(1)), m.group(2).lower()
        if open_tag:
            if closing and tag == open_tag:
                open_tag, at = "", m.end()
            continue
        if closing:
            if not document:  # a stray closing tag: dropped from a message, kept in a document
                kept.append(text[at : m.start()])
                counts[TAGS[tag]] += 1
                at = m.end()
            continue
        if last_close.get(tag, -1) > m.start():
            kept.append(text[at : m.start()])
            counts[TAGS[tag]] += 1
            open_tag = tag
            continue
        if not document:  # never closed: the rest of the message goes
            kept.append(text[at : m.start()])
            counts[TAGS[tag]] += 1
            at = len(text)
            break
        line, counted = line + text.count("\n", counted, m.start()), m.start()
        unclosed.append(Unclosed(TAGS[tag], line, m.start()))
    kept.append(text[at:])
    return Dropped("".join(kept), counts, tuple(unclosed))
