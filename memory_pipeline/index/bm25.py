"""The BM25 formula, the one place it is computed in Python.

Okapi BM25 with Lucene's idf, ``log(1 + (N - n + 0.5) / (n + 0.5))`` (Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), with
the parameters and the one-byte document-length encoding of tantivy, so that a
score computed here equals the one tantivy gives the same document once it is
indexed (see ``SparseIndex.score_external``; the parity with ``rank_bm25`` is
tested in ``tests/index/test_sparse.py``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_pipeline.errors import InvalidInputError

#: tantivy's BM25 parameters (hard-coded in tantivy, not configurable).
K1 = 1.2
B = 0.75


def _decode_fieldnorm_id(code: int) -> int:
    # tantivy/src/fieldnorm/code.rs (same scheme as Lucene's SmallFloat.byte4ToInt):
    # ids below 24 are exact; above, 3 mantissa bits and an exponent.
    if code < 24:
        return code
    b = code - 24
    bits, shift = b & 0b111, b >> 3
    return 24 + (bits if shift == 0 else (bits | 8) << (shift - 1))


#: Document lengths tantivy can store: ``FIELD_NORMS_TABLE[id]`` for the 256
#: one-byte ids; 0..40 exactly, then 42, 44, ..., 56, 60, 64, ...
FIELD_NORMS_TABLE: tuple[int, ...] = tuple(_decode_fieldnorm_id(i) for i in range(256))


def quantize_length(num_tokens: int) -> int:
    """The document length tantivy uses in BM25 for a field of ``num_tokens`` tokens.

    tantivy stores the length in one byte and rounds *down* to the nearest
    representable value (``fieldnorm_to_id``).
    """
    return FIELD_NORMS_TABLE[bisect_right(FIELD_NORMS_TABLE, num_tokens) - 1]


def distinct_terms(tokens: Sequence[str]) -> list[str]:
    """A query's terms: each token once, in order, none empty (BM25 scores a term once)."""
    return [t for t in dict.fromkeys(tokens) if t]


def idf(n_docs: int, doc_freq: int) -> float:
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def score_documents(
    query_terms: Sequence[str],
    docs: Sequence[tuple[int, Sequence[str]]],
    *,
    n_index: int = 0,
    tokens_index: float = 0.0,
    doc_freq_index: Callable[[str], int] = lambda _term: 0,
) -> list[tuple[int, float]]:
    """BM25 of ``docs`` (id, tokens) for distinct ``query_terms``, best first, no zeros.

    Collection statistics are those of an index (``n_index`` documents holding
    ``tokens_index`` tokens, ``doc_freq_index(term)``) extended by ``docs`` as if
    they had been added; with the defaults, ``docs`` alone are the collection.
    """
    if not query_terms or not docs:
        return []
    query_set = set(query_terms)
    doc_tfs: list[tuple[int, dict[str, int], int]] = []
    ext_df: Counter[str] = Counter()
    total_tokens = tokens_index
    for chunk_id, tokens in docs:
        if isinstance(tokens, str):
            raise InvalidInputError(
                f"chunk {chunk_id}: tokens must be a sequence of strings, got one str."
            )
        total_tokens += len(tokens)
        tfs = {t: c for t, c in Counter(tokens).items() if t in query_set}
        ext_df.update(tfs.keys())
        doc_tfs.append((int(chunk_id), tfs, len(tokens)))
    n_total = n_index + len(docs)
    avgdl = total_tokens / n_total
    if avgdl <= 0:
        return []
    weight = {
        t: idf(n_total, doc_freq_index(t) + ext_df[t]) * (1.0 + K1) for t in query_set if ext_df[t]
    }
    out: list[tuple[int, float]] = []
    for cid, tfs, length in doc_tfs:
        if not tfs:
            continue
        norm = K1 * (1.0 - B + B * quantize_length(length) / avgdl)
        score = sum(weight[t] * tf / (tf + norm) for t, tf in tfs.items())
        if score > 0.0:
            out.append((cid, score))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


@dataclass(frozen=True)
class IndexStats:
    """An index's collection statistics as its BM25 uses them: documents, tokens, and
    the document frequency of a term (asked for the query's terms only)."""

    n_docs: int
    n_tokens: float
    doc_freq: Callable[[str], int]


def score_external(
    query_tokens: Sequence[str],
    docs: Sequence[tuple[int, Sequence[str]]],
    stats: Callable[[list[str]], IndexStats],
) -> list[tuple[int, float]]:
    """BM25 of ``docs`` an index does not hold, as if they had been added (every
    backend's ``SparseIndex.score_external``): ``stats(terms)`` reads the index's
    statistics for the query's distinct terms, once, and only when there is something
    to score."""
    terms = distinct_terms(query_tokens)
    if not terms or not docs:
        return []
    index = stats(terms)
    return score_documents(
        terms,
        docs,
        n_index=index.n_docs,
        tokens_index=index.n_tokens,
        doc_freq_index=index.doc_freq,
    )
