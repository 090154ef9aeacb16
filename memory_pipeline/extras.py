"""The optional parts of the install, and the one line that names the part a command lacks.

The default install runs every command on the default model (ONNX Runtime, no torch).
``torch`` adds sentence-transformers for every other model, the cross-encoder and the
torch runtime; ``pipeline`` adds Dagster. docs/install.md says what each costs.
"""

from __future__ import annotations

TORCH = "torch"
PIPELINE = "pipeline"

#: Where the docs say how to get torch's CPU build (an extra cannot choose it).
CPU_BUILD_DOC = "docs/install.md"


def install_line(extra: str) -> str:
    return f"pip install 'memory-pipeline[{extra}]'"


def missing(what: str, extra: str, reason: object) -> str:
    """``what`` cannot run in this install (``reason``: the ImportError, or what was not
    found): which extra brings it, in one line."""
    line = f"{what} needs the {extra!r} extra, which this install leaves out ({reason}): "
    line += install_line(extra)
    if extra == TORCH:
        line += f" (torch's CPU build first: {CPU_BUILD_DOC})"
    return line
