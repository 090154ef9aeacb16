"""A private key's body cut over several texts: the chunks of one document, in order.

The redactor (``secrets.py``) takes a PEM, OpenSSH or PuTTY key whole when one text holds
its ``BEGIN`` line; a key longer than a chunk leaves its other lines in chunks that hold
nothing but base64. Base64 alone is no secret (an image, a certificate, a checksum), so a
line is a key's only when it sits in a run of lines of a key's width — 64 characters (PEM,
PuTTY) or 70 (OpenSSH), the last one shorter — that a private key's opening line
(``-----BEGIN … PRIVATE KEY-----``, PuTTY's ``Public-Lines:`` / ``Private-Lines:``, or the
marker the redactor left in its place) comes right before, or its closing line (``-----END …
PRIVATE KEY-----``, ``Private-MAC:``) right after; the run is followed from text to text
through a document's chunks, whatever heading trail or overlap each one starts with.

``key_lines`` returns the lines found (their values: overlapping chunks repeat them), and
``take_lines`` replaces each of them, wherever it stands whole in a text (a turn's index
text quotes its neighbours' lines on one line), by the redactor's marker, one marker a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from memory_pipeline.hygiene.secrets import marker

KIND = "private-key"
#: The widths a key's lines are wrapped at: PEM and PuTTY (64), OpenSSH (70).
WIDTHS = frozenset({64, 70})
#: A last line is taken where it stands between its run and the closing line; with no
#: closing line after it, only when it is this long and holds what no word does.
SHORTEST_LAST = 12

# Where a line ends: a newline, or its escape in a JSON or quoted string.
_BREAK = re.compile(r"\r?\n|\\r\\n|\\n")
# What a tool or a quote puts before a line: a line number (``  12→``), a ``>``.
_LEAD = r"^\s*+(?:>\s?)?(?:\d{1,6}(?:→|\t|:\s))?\s*+"
# A line's base64, behind its lead and a quote mark, and what a string puts after it.
_BODY = re.compile(_LEAD + r"[\"']?(?P<b64>[A-Za-z0-9+/]+={0,2})[\"']?,?\s*")
_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----\s*$")
_OPENS = re.compile(
    rf"(?:-----BEGIN[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----|{re.escape(marker(KIND))})\s*$"
    rf"|{_LEAD}(?:Public|Private)-Lines: \d+\s*$"
)
_CLOSES = re.compile(
    _LEAD + r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|Private-MAC: [0-9a-fA-F]+|Private-Lines: \d+)"
)
# What may stand between a PEM's BEGIN line and its body: an encrypted key's headers.
_PEM_HEADER = re.compile(_LEAD + r"(?:(?:Proc-Type|DEK-Info): |$)")
# A word as a key's line stands in any text: base64 not touching more base64.
_WORD = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{4,}={0,2}(?![A-Za-z0-9+/=])")
_TAKEN = re.escape(marker(KIND))
# Markers of one run, with only line breaks (and a tool's line numbers) between them.
_RUN = re.compile(rf"{_TAKEN}(?:(?:\s|\\[nrt])+(?:\d{{1,6}}(?:→|\t|:\s))?\s*{_TAKEN})+")


@dataclass
class _Run:
    """Where a walk over the lines is: in a key's body (``open``), at what width."""

    open: bool = False
    width: int | None = None
    after_begin: bool = False  # read forward, right after a PEM BEGIN line: headers may come
    last_read: bool = False  # read back, the (shorter) last line is behind


def _lines(text: str) -> list[str]:
    return _BREAK.split(text)


def _body(line: str) -> str | None:
    found = _BODY.fullmatch(line)
    return None if found is None else found["b64"]


def _scrambled(body: str) -> bool:
    """Not a word: a digit, a ``+`` or ``/`` in it, or padding at its end."""
    return body.endswith("=") or any(c.isdigit() or c in "+/" for c in body)


def _trail(lines: list[str]) -> int:
    """How many lines a chunk starts with that are its heading trail (``# A > ## B``) and
    the blank line after it: not the document's text, so they break no run."""
    n = 0
    while n < len(lines) and (not lines[n].strip() or lines[n].lstrip().startswith("#")):
        n += 1
    return n


def _forward(chunks: Sequence[list[str]]) -> Iterator[str]:
    """The lines each opening line's run holds, read forward from it."""
    run = _Run()
    for lines in chunks:
        last = len(lines) - 1
        for at in range(_trail(lines), len(lines)):
            line = lines[at]
            body = _body(line)
            if run.open and body is not None:
                if run.width is None and len(body) in WIDTHS:
                    run.width, run.after_begin = len(body), False
                    yield body
                    continue
                if run.width is not None and len(body) == run.width:
                    yield body
                    continue
                if run.width is not None and len(body) < run.width:
                    closed = at < last and _CLOSES.match(lines[at + 1])
                    if closed or (len(body) >= SHORTEST_LAST and _scrambled(body)):
                        yield body
                    # the key's last line; at a chunk's end perhaps only the part of one the
                    # chunk could hold, the rest in the next chunk
                    run.open = at == last
                    continue
            if run.open and run.after_begin and _PEM_HEADER.match(line):
                continue
            run = _Run()
            if _OPENS.search(line):
                run = _Run(open=True, after_begin=bool(_BEGIN.search(line)))


def _backward(chunks: Sequence[list[str]]) -> Iterator[str]:
    """The lines each closing line's run holds, read back from it."""
    run = _Run()
    for lines in reversed(chunks):
        first = _trail(lines)
        for at in range(len(lines) - 1, first - 1, -1):
            line = lines[at]
            body = _body(line)
            if run.open and body is not None:
                if run.width is None and len(body) in WIDTHS:
                    run.width = len(body)
                    yield body
                    continue
                if run.width is not None and len(body) == run.width:
                    yield body
                    continue
                if run.width is None and not run.last_read:
                    run.last_read = True  # the last line, right before the closing one
                    yield body
                    continue
            run = _Run()
            if _CLOSES.match(line):
                run = _Run(open=True)


# One of these stands in every opening or closing line: a document with none is not read.
_HINTS = ("PRIVATE KEY", "-Lines: ", "Private-MAC: ", marker(KIND))


def key_lines(texts: Iterable[str]) -> frozenset[str]:
    """The lines of private keys' bodies in ``texts``, one document's chunks in order."""
    texts = list(texts)
    if not any(hint in text for text in texts for hint in _HINTS):
        return frozenset()
    chunks = [_lines(text) for text in texts]
    return frozenset(_forward(chunks)) | frozenset(_backward(chunks))


def take_lines(text: str, lines: frozenset[str]) -> tuple[str, int]:
    """``text`` with each of ``lines`` that stands whole in it replaced by the marker, the
    lines of one run by one marker; and how many markers it gained."""
    if not lines or not text:
        return text, 0

    def taken(word: re.Match[str]) -> str:
        value = word.group()
        if value in lines:
            return marker(KIND)
        escaped = word.start() > 0 and text[word.start() - 1] == "\\" and value[0] in "nrt"
        if escaped and value[1:] in lines:  # a line after a ``\n`` escape
            return value[0] + marker(KIND)
        return value

    new = _WORD.sub(taken, text)
    if new == text:
        return text, 0
    before = text.count(marker(KIND))
    new = _RUN.sub(marker(KIND), new)
    return new, max(1, new.count(marker(KIND)) - before)
