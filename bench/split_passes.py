"""The ONNX embedder as it was before a batch's texts ran side by side, for benchmarks
that print both in one run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_pipeline.embedding.onnx import OnnxEmbedder


class SplitPasses(OnnxEmbedder):
    """The ONNX embedder as it was: one text at a time, each forward pass split across
    the embedding threads (which meet at every operator)."""

    def _create_session(self) -> Any:
        import onnxruntime as ort

        from memory_pipeline.embedding.onnx_export import MODEL_FILE

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        return ort.InferenceSession(
            str(self.folder() / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        threads, self.threads = self.threads, 1  # one text at a time
        try:
            return super()._embed(texts)
        finally:
            self.threads = threads
