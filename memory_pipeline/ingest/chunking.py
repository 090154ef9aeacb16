"""Structure-aware chunking under a token budget measured by the embedding model's tokenizer.

Order of preference for cut points: markdown headings (sections never share a chunk), then
paragraphs, then sentences (English ``.!?`` and Japanese ``。！？``), then lines, then raw
characters. Each chunk is prefixed with its heading trail so it is self-describing once
retrieved alone. The tokenizer is called once per piece and once per emitted chunk (never
on growing concatenations), so cost stays linear in the text length.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memory_pipeline.errors import InvalidInputError

MIN_CHUNK_SIZE = 16
_MIN_CHUNK_SIZE = MIN_CHUNK_SIZE
_FORMATS = {"markdown": True, "html": True, "text": False, "pdf": False}  # fmt -> has markdown?
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A sentence ends at .!? followed by whitespace (so "3.14" and "e.g.x" stay whole) or at
# 。！？ regardless of what follows (Japanese puts no space after them). Closing quotes and
# brackets stay with their sentence; group 1 is the whitespace that becomes the separator.
_SENTENCE_END = re.compile(
    # Leading single class first: lets the regex engine skip non-punctuation fast (~5x).
    r"[.!?。！？](?:(?<=[.!?])[.!?]*[\"'”’)\]]*(?=\s)|(?<=[。！？])[。！？]*[」』）\"'”’)\]]*)(\s*)"
)
_NONBLANK_LINE = re.compile(r"[^\n]*\S[^\n]*")
_SOFT_CUTS = ("、", "，", ",", ";", "；")


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    token_count: int
    heading_path: tuple[str, ...]


@dataclass(slots=True)
class _Piece:
    text: str
    tokens: int  # net of the counter's fixed overhead (e.g. [CLS]/[SEP]), see chunk_document
    sep: str  # what joins it to the previous piece of the same section
    para_start: bool = False
    para_total: int = 0  # estimated net tokens of the whole paragraph, on its first piece


@dataclass(slots=True)
class _Section:
    headings: tuple[tuple[int, str], ...]
    blocks: list[tuple[str, bool]]  # (text, is fenced code)


class _Counter:
    """Token counting net of the per-call overhead, with separator costs cached."""

    def __init__(self, token_counter: Callable[[str], int]) -> None:
        self._fn = token_counter
        self.overhead = 0
        self.overhead = max(0, self.raw(""))
        self._seps: dict[str, int] = {"": 0}

    def raw(self, text: str) -> int:
        result = self._fn(text)
        try:
            n = operator.index(result)  # accepts numpy ints, rejects floats and None
        except TypeError:
            n = -1
        if n < 0:
            raise InvalidInputError(
                f"token_counter must return a non-negative int, got {result!r}; pass the "
                "embedding model's token-count function"
            )
        return n

    def net(self, text: str) -> int:
        return max(0, self.raw(text) - self.overhead)

    def sep(self, text: str) -> int:
        cost = self._seps.get(text)
        if cost is None:
            cost = self._seps[text] = self.net(text)
        return cost


#: Chunk budget and overlap in the embedding model's tokens.
DEFAULT_MAX_CHUNK_SIZE = 256
DEFAULT_CHUNK_OVERLAP = 32


def chunk_document(
    text: str,
    *,
    token_counter: Callable[[str], int],
    max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
    overlap: int = DEFAULT_CHUNK_OVERLAP,
    fmt: str = "markdown",
) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_chunk_size`` tokens each (never empty)."""
    _validate(text, token_counter, max_chunk_size, overlap, fmt)
    counter = _Counter(token_counter)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    sections = _parse_sections(text, markdown=_FORMATS[fmt])
    if not sections and text.strip():
        # Only headings (e.g. "# Title"): keep them as content rather than emit nothing.
        sections = _parse_sections(text, markdown=False)
    chunks: list[Chunk] = []
    for section in sections:
        prefix, prefix_net = _prefix(section.headings, counter, max_chunk_size)
        budget = max_chunk_size - counter.overhead - prefix_net
        if budget < 1:
            raise InvalidInputError(
                f"token_counter counts {counter.overhead} tokens for empty text, leaving no room "
                f"in max_chunk_size={max_chunk_size}; raise max_chunk_size"
            )
        path = tuple(h for _, h in section.headings)
        pieces = _section_pieces(section.blocks, counter, budget)
        for group in _pack(pieces, budget, overlap, counter):
            for chunk_text, n in _emit(group, prefix, counter, max_chunk_size):
                chunks.append(Chunk(len(chunks), chunk_text, n, path))
    return chunks


def _validate(
    text: object, token_counter: object, max_chunk_size: object, overlap: object, fmt: object
) -> None:
    if not isinstance(text, str):
        raise InvalidInputError(f"text must be a str, got {type(text).__name__}")
    if not callable(token_counter):
        raise InvalidInputError("token_counter must be a callable str -> int (the model tokenizer)")
    if isinstance(max_chunk_size, bool) or not isinstance(max_chunk_size, int):
        raise InvalidInputError(f"max_chunk_size must be an int, got {max_chunk_size!r}")
    if max_chunk_size < _MIN_CHUNK_SIZE:
        raise InvalidInputError(
            f"max_chunk_size must be at least {_MIN_CHUNK_SIZE} tokens, got {max_chunk_size}"
        )
    if isinstance(overlap, bool) or not isinstance(overlap, int):
        raise InvalidInputError(f"overlap must be an int, got {overlap!r}")
    if not 0 <= overlap < max_chunk_size / 2:
        raise InvalidInputError(
            f"overlap must be >= 0 and < max_chunk_size/2 ({max_chunk_size / 2:g}), got {overlap}; "
            f"lower it (e.g. overlap={max_chunk_size // 8}) or use 0 to disable overlap"
        )
    if not isinstance(fmt, str) or fmt not in _FORMATS:
        raise InvalidInputError(f"unknown fmt {fmt!r}; use one of: {', '.join(_FORMATS)}")


def _parse_sections(text: str, *, markdown: bool) -> list[_Section]:
    """One pass over lines: headings open sections, blank lines end paragraphs, fences win."""
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    blocks: list[tuple[str, bool]] = []
    para: list[str] = []
    code: list[str] = []
    fence: str | None = None

    def end_para() -> None:
        block = "\n".join(para).strip()
        para.clear()
        if block:
            blocks.append((block, False))

    for line in text.split("\n"):
        if fence is not None:
            code.append(line)
            closing = line.strip()
            if closing.startswith(fence) and set(closing) == {fence[0]}:
                blocks.append(("\n".join(code), True))
                code, fence = [], None
            continue
        if markdown:
            if m := _FENCE.match(line):
                end_para()
                fence, code = m.group(1), [line]
                continue
            if h := _HEADING.match(line):
                end_para()
                if blocks:  # a heading with no body of its own only lives on in prefixes
                    sections.append(_Section(tuple(stack), blocks))
                    blocks = []
                level = len(h.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, h.group(2).strip()))
                continue
        if line.strip():
            para.append(line)
        else:
            end_para()
    if fence is not None and "\n".join(code).strip():  # unclosed fence: rest is code
        blocks.append(("\n".join(code).rstrip(), True))
    end_para()
    if blocks:
        sections.append(_Section(tuple(stack), blocks))
    return sections


def _prefix(
    headings: tuple[tuple[int, str], ...], counter: _Counter, max_chunk_size: int
) -> tuple[str, int]:
    """Heading trail "# A > ## B\\n\\n"; shortened if it would eat over half the budget."""
    candidates = [headings, headings[-1:]] if headings else []
    for trail in candidates:
        prefix = " > ".join("#" * level + " " + title for level, title in trail) + "\n\n"
        net = counter.net(prefix)
        if net <= max_chunk_size // 2:
            return prefix, net
    return "", 0


def _sentences(block: str) -> list[tuple[str, str]]:
    """(sentence, whitespace before it) pairs; the whitespace is kept to rejoin losslessly."""
    out: list[tuple[str, str]] = []
    pos, sep = 0, ""
    for m in _SENTENCE_END.finditer(block):
        out.append((block[pos : m.start(1)], sep))
        sep, pos = m.group(1), m.end()
    if pos < len(block) and block[pos:].strip():
        out.append((block[pos:], sep))
    return out


def _section_pieces(blocks: list[tuple[str, bool]], counter: _Counter, budget: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for block, is_code in blocks:
        # Code is kept whole when it fits; otherwise it is cut by lines, never by sentences.
        units = [(block, "")] if is_code else _sentences(block)
        para: list[_Piece] = []
        for unit, unit_sep in units:
            n = counter.net(unit)
            if n <= budget:  # the common case, kept cheap: one count per sentence
                para.append(_Piece(unit, n, unit_sep))
                continue
            for j, (part, part_sep, part_n) in enumerate(_split_long(unit, n, counter, budget)):
                para.append(_Piece(part, part_n, part_sep if j else unit_sep))
        if not para:
            continue
        para[0].sep, para[0].para_start = "\n\n", True
        para[0].para_total = sum(p.tokens for p in para) + sum(counter.sep(p.sep) for p in para[1:])
        pieces.extend(para)
    return pieces


def _split_long(unit: str, n: int, counter: _Counter, budget: int) -> list[tuple[str, str, int]]:
    """An over-budget unit (``n`` tokens) cut by lines, then over-long lines by hard cuts."""
    lines: list[tuple[str, str]] = []
    prev_end = 0
    for m in _NONBLANK_LINE.finditer(unit):
        lines.append((m.group(), unit[prev_end : m.start()]))
        prev_end = m.end()
    out: list[tuple[str, str, int]] = []
    for line, sep in lines:
        line_n = n if len(lines) == 1 else counter.net(line)
        if line_n <= budget:
            out.append((line, sep, line_n))
            continue
        cuts = _hard_split(line, line_n, counter, budget)
        out.append((cuts[0][0], sep, cuts[0][2]))
        out.extend(cuts[1:])
    return out


def _hard_split(
    text: str, tokens: int, counter: _Counter, budget: int
) -> list[tuple[str, str, int]]:
    """Cut one over-long line into parts within budget, preferring whitespace, then commas."""
    out: list[tuple[str, str, int]] = []
    pos = len(text) - len(text.lstrip())
    sep = ""
    chars_per_token = len(text) / max(tokens, 1)
    while pos < len(text):
        # Aim a little under the budget from the observed density so most parts count once.
        width = max(1, int(budget * chars_per_token * 0.9))
        while True:
            end = min(len(text), pos + width)
            cut = end
            if end < len(text):
                lo = pos + max(1, width // 2)
                space = max(text.rfind(c, lo, end) for c in (" ", "\t", "\n", "\u3000"))
                soft = max(text.rfind(c, lo, end - 1) for c in _SOFT_CUTS)
                cut = space if space > pos else (soft + 1 if soft > pos else end)
            part = text[pos:cut]
            n = counter.net(part)
            if n <= budget:
                break
            if cut - pos == 1:
                raise InvalidInputError(
                    f"token_counter counts {n} tokens for the single character {part!r}, over "
                    f"the budget of {budget}; raise max_chunk_size or check the counter"
                )
            width = max(1, (cut - pos) // 2)
        out.append((part, sep, n))
        nxt = cut
        while nxt < len(text) and text[nxt].isspace():
            nxt += 1
        sep, pos = text[cut:nxt], nxt
        chars_per_token = len(part) / max(n, 1)
    return out


def _cost(pieces: list[_Piece], counter: _Counter) -> int:
    if not pieces:
        return 0
    return sum(p.tokens for p in pieces) + sum(counter.sep(p.sep) for p in pieces[1:])


def _pack(
    pieces: list[_Piece], budget: int, overlap: int, counter: _Counter
) -> Iterator[list[_Piece]]:
    """Greedy packing by summed piece counts.

    A paragraph that would fit a fresh chunk is moved there whole instead of being split,
    unless the current chunk is under half full: tiny chunks retrieve worse than split ones.
    """
    cur: list[_Piece] = []
    total = 0
    fresh = 0  # pieces in cur that are not overlap carried from the previous chunk
    for p in pieces:
        whole_para = p.para_start and p.para_total <= budget and total >= budget // 2
        need = p.para_total if whole_para else p.tokens
        if fresh and total + counter.sep(p.sep) + need > budget:
            yield cur
            cur = _tail(cur, overlap, counter)
            # Give up carried context before letting it push the new content out.
            while cur and _cost(cur, counter) + counter.sep(p.sep) + need > budget:
                cur.pop(0)
            total, fresh = _cost(cur, counter), 0
        total += p.tokens + (counter.sep(p.sep) if cur else 0)
        cur.append(p)
        fresh += 1
    if fresh:
        yield cur


def _tail(chunk: list[_Piece], overlap: int, counter: _Counter) -> list[_Piece]:
    """Trailing pieces worth at most ``overlap`` tokens, never the whole previous chunk."""
    tail: list[_Piece] = []
    total = 0
    for p in reversed(chunk[1:]):
        extra = p.tokens + (counter.sep(tail[0].sep) if tail else 0)
        if total + extra > overlap:
            break
        tail.insert(0, p)
        total += extra
    return tail


def _emit(group: list[_Piece], prefix: str, counter: _Counter, limit: int) -> list[tuple[str, int]]:
    """Render and count the real chunk; tokenizers are not additive, so split if it overflows."""
    body = group[0].text + "".join(p.sep + p.text for p in group[1:])
    text = prefix + body
    n = counter.raw(text)
    if n <= limit:
        return [(text, n)]
    if len(group) > 1:
        mid = len(group) // 2
        right = [_Piece(group[mid].text, group[mid].tokens, ""), *group[mid + 1 :]]
        return _emit(group[:mid], prefix, counter, limit) + _emit(right, prefix, counter, limit)
    piece = group[0]
    if len(piece.text) < 2:
        raise InvalidInputError(
            f"token_counter counts {n} tokens for a chunk holding only {piece.text!r}; "
            "raise max_chunk_size or check the counter"
        )
    mid = len(piece.text) // 2
    halves = [piece.text[:mid].strip(), piece.text[mid:].strip()]
    out: list[tuple[str, int]] = []
    for half in halves:
        if half:
            out += _emit([_Piece(half, 0, "")], prefix, counter, limit)
    return out
