"""The embedding runtimes of the default model, by name (no model code: config reads it).

The default multilingual-e5-small runs either through ONNX Runtime (``onnx``: no
torch in the process, the int8 export) or through sentence-transformers
(``torch``). They are two embedding spaces with two model ids, so a memory keeps
the one it was embedded with: ``auto`` picks that one, and ``onnx`` for a memory
that holds no vectors of the default model yet.
"""

from __future__ import annotations

from collections.abc import Iterable

AUTO = "auto"
ONNX = "onnx"
TORCH = "torch"
RUNTIMES = (AUTO, ONNX, TORCH)
VARIABLE = "HYBRID_RAG_EMBEDDING_RUNTIME"
#: Every model id of the default model ends the same way after its runtime tag.
ONNX_TAG = "onnx int8"


def runtime_of(model_id: str) -> str:
    """``onnx`` or ``torch``: which runtime made vectors of this (default-model) id."""
    return ONNX if ONNX_TAG in model_id else TORCH


def choose(configured: str, stored_ids: Iterable[str], torch_id: str, onnx_id: str) -> str:
    """The runtime to use: the configured one, or for ``auto`` the memory's own."""
    if configured != AUTO:
        return configured
    stored = set(stored_ids)
    if torch_id in stored and onnx_id not in stored:
        return TORCH
    return ONNX


def mismatch_hint(stored_id: str, configured_id: str) -> str:
    """What to do when a memory of one runtime meets the other: "" for unrelated models."""
    base = stored_id.replace(f", {ONNX_TAG}", "")
    if base != configured_id.replace(f", {ONNX_TAG}", "") or stored_id == configured_id:
        return ""
    wanted = runtime_of(stored_id)
    return (
        f" It is the same model run by the other runtime: set {VARIABLE}={wanted} (or auto) "
        f"to use the {wanted} vectors this memory holds, or re-embed it into a new store."
    )
