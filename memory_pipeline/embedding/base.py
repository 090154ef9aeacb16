"""The embedder seam: a small Protocol and a fast deterministic implementation."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memory_pipeline.index.tokenizer import tokenize


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit vectors. ``model_id`` names the embedding space."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


class HashingEmbedder:
    """Feature-hashed bag of words, L2-normalised: deterministic and fast.

    Not a semantic model. It exists so tests and benchmarks can exercise the
    index, fusion and storage costs without paying for model forward passes.
    """

    def __init__(self, dim: int = 384, max_tokens: int = 256) -> None:
        self.dim = dim
        self.max_tokens = max_tokens
        self.model_id = f"hashing-bow-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for token in tokenize(text):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def count_tokens(self, text: str) -> int:
        return len(tokenize(text))
