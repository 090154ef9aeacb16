"""Other phrasings of the same question: checked, de-duplicated, embedded together.

Query expansion is the caller's job (an agent knows what it meant and the names
the memory may use); the search only takes the rewrites it is given and fuses
them (``fusion.fuse_phrasings``). It never invents one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory_pipeline.embedding.base import Embedder
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.metadata import check_text
from memory_pipeline.search.params import MAX_REWRITES as MAX_REWRITES


def phrasings(query: str, rewrites: Sequence[str]) -> tuple[str, ...]:
    """The query, then each distinct rewrite, or InvalidInputError saying what to fix.

    A rewrite that only repeats the query (or an earlier rewrite) up to case and
    spacing is dropped: it would search the same thing twice and weigh it double.
    """
    if isinstance(rewrites, str | bytes) or not isinstance(rewrites, Sequence):
        raise InvalidInputError(
            f"rewrites must be a list of strings, got {type(rewrites).__name__}; "
            "pass each phrasing as its own item"
        )
    if len(rewrites) > MAX_REWRITES:
        raise InvalidInputError(
            f"rewrites: at most {MAX_REWRITES} are allowed, got {len(rewrites)}; "
            "keep the few phrasings that differ most"
        )
    seen = {_key(query)}
    out = [query]
    for i, rewrite in enumerate(rewrites):
        if not isinstance(rewrite, str) or not rewrite.strip():
            raise InvalidInputError(
                f"rewrites[{i}] must be a non-empty string, got {rewrite!r}; "
                "drop it or write the phrasing out"
            )
        check_text(f"rewrites[{i}]", rewrite, multiline=True)
        if _key(rewrite) not in seen:
            seen.add(_key(rewrite))
            out.append(rewrite)
    return tuple(out)


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def embed_phrasings(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
    """One query vector per text: a lone text by ``embed_query`` (a search without
    rewrites is embedded as it always was), several in one batched call when the
    embedder has ``embed_queries``, else one ``embed_query`` each."""
    batch = getattr(embedder, "embed_queries", None)
    if len(texts) > 1 and callable(batch):
        return list(np.asarray(batch(list(texts)), dtype=np.float32))
    return [embedder.embed_query(t) for t in texts]
