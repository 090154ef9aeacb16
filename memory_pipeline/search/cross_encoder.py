"""Optional cross-encoder re-ranking stage.

A cross-encoder reads (query, passage) together and is much more precise than the
bi-encoder + BM25 first stage, but costs one transformer pass per pair, so the search
pipeline applies it to the head of the fused pool only. It is optional: without a
configured or loadable model the pipeline skips the stage and reports why
(:func:`load_reranker` returns that reason instead of raising).

Loading is strictly local (``local_files_only=True``, CPU): a search service must not
stall on, or depend on, a model hub at query time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from memory_pipeline import extras
from memory_pipeline.errors import InvalidInputError, ModelUnavailableError

if TYPE_CHECKING:  # the import costs ~seconds (torch); only pay it when a model is used
    from sentence_transformers import CrossEncoder

RERANKER_ENV_VAR = "HYBRID_RAG_RERANKER_MODEL"
NOT_CONFIGURED_STATUS = f"no cross-encoder configured (set {RERANKER_ENV_VAR})"
_MAX_REASON_CHARS = 300


@runtime_checkable
class Reranker(Protocol):
    """Anything that scores passages against a query; higher means more relevant."""

    name: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, same order; scores are comparable within one call."""
        ...


def _looks_like_path(name_or_path: str) -> bool:
    """True for strings that can only be a filesystem path, never a hub id "org/name".

    Used to report "no such folder" instead of the hub client's confusing repo-id error.
    """
    return (
        name_or_path.startswith(("/", "./", "../", "~"))
        or name_or_path.count("/") > 1
        or "\\" in name_or_path
        or os.path.exists(os.path.expanduser(name_or_path))
    )


def _summarise(exc: BaseException) -> str:
    """First line of an exception, typed and shortened: fit for a status string."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    summary = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if len(summary) > _MAX_REASON_CHARS:
        summary = summary[: _MAX_REASON_CHARS - 3] + "..."
    return summary


class CrossEncoderReranker:
    """A ``sentence_transformers.CrossEncoder`` behind the :class:`Reranker` protocol.

    The model is loaded lazily, once, on first :meth:`load` or :meth:`score` (thread
    safe). A failed load is remembered and re-raised on later calls rather than retried
    on every query, because a missing model will not appear between two searches.
    """

    def __init__(self, name_or_path: str, *, batch_size: int = 32, max_length: int = 512) -> None:
        if not isinstance(name_or_path, str) or not name_or_path.strip():
            raise InvalidInputError("cross-encoder name_or_path must be a non-empty string")
        if batch_size < 1:
            raise InvalidInputError(f"cross-encoder batch_size must be >= 1, got {batch_size}")
        if max_length < 8:
            raise InvalidInputError(f"cross-encoder max_length must be >= 8, got {max_length}")
        self.name = name_or_path.strip()
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: CrossEncoder | None = None
        self._load_error: str | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now. Raises ModelUnavailableError with the reason and a fix."""
        self._ensure_model()

    def _ensure_model(self) -> CrossEncoder:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                if self._load_error is not None:
                    raise ModelUnavailableError(self._load_error)
                try:
                    self._model = self._load()
                except ModelUnavailableError as exc:
                    self._load_error = str(exc)
                    raise
        return self._model

    def _load(self) -> CrossEncoder:
        target = self.name
        if _looks_like_path(target):
            folder = Path(target).expanduser()
            if not folder.is_dir():
                raise ModelUnavailableError(
                    f"cross-encoder folder {str(folder)!r} does not exist or is not a "
                    f"directory; point {RERANKER_ENV_VAR} at a folder saved with "
                    "save_pretrained, or unset it to search without re-ranking"
                )
            target = str(folder.resolve())
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            what = f"cross-encoder {self.name!r}"
            raise ModelUnavailableError(extras.missing(what, extras.TORCH, exc)) from exc
        try:
            model = CrossEncoder(
                target,
                device="cpu",
                local_files_only=True,
                max_length=self.max_length,
            )
        # transformers / huggingface_hub raise OSError, ValueError, KeyError, RuntimeError,
        # ImportError... depending on what is missing; all mean "cannot use this model".
        except Exception as exc:
            raise ModelUnavailableError(
                f"cannot load cross-encoder {self.name!r} ({_summarise(exc)}). Loading is "
                "offline: pass a local folder, or a hub id already in the Hugging Face "
                f"cache; unset {RERANKER_ENV_VAR} to search without re-ranking"
            ) from exc
        if model.num_labels != 1:
            raise ModelUnavailableError(
                f"cross-encoder {self.name!r} has {model.num_labels} output labels; a "
                "re-ranker needs a single relevance score per pair (num_labels=1)"
            )
        # Tokenising past the model's position table would crash inside torch on the
        # first long passage; truncate to what the model can actually embed instead.
        config = getattr(model.transformers_model, "config", None)
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and 0 < positions < self.max_length:
            model.max_seq_length = positions
        return model

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Cross-encoder relevance of each passage to ``query`` (sigmoid for 1-label
        models, so in (0, 1)); order and length follow ``passages``."""
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        if isinstance(passages, str):
            # A bare string is a Sequence[str] of characters: almost surely a caller bug.
            raise InvalidInputError("passages must be a sequence of strings, not one string")
        if len(passages) == 0:
            return []
        model = self._ensure_model()
        pairs = [(query, str(p)) for p in passages]
        raw = model.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        scores = np.asarray(raw, dtype=np.float64).reshape(-1)
        return [float(s) for s in scores]

    def __repr__(self) -> str:
        state = "loaded" if self._model is not None else "not loaded"
        return f"CrossEncoderReranker({self.name!r}, {state})"


def load_reranker(name_or_path: str | None) -> tuple[Reranker | None, str]:
    """Build and eagerly load a cross-encoder; never raises for a bad configuration.

    Returns ``(reranker, status)``. ``reranker`` is None when nothing is configured
    (``None`` or blank) or when the model cannot be loaded; ``status`` then says why in
    one line, for the search pipeline to report when it skips the stage. Loading happens
    here, not at the first query, so the status is true and the first search is not slow.
    """
    if name_or_path is None or not name_or_path.strip():
        return None, NOT_CONFIGURED_STATUS
    reranker = CrossEncoderReranker(name_or_path)
    try:
        reranker.load()
    except ModelUnavailableError as exc:
        return None, f"cross-encoder unavailable: {exc}"
    return reranker, f"cross-encoder {reranker.name!r} loaded (CPU)"
