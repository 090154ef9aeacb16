"""When the heavy models (embedder, optional cross-encoder) and the index are loaded.

``lazy``: on the first call that needs them. ``eager``: before the server
answers its first message. ``background``: a thread starts loading as the
server starts serving, and the server answers meanwhile; a call that needs a
model waits for the load in progress (the embedders load under a lock), never
starts a second. Under ``background`` the ONNX session is created even earlier,
as soon as the memory opens (``start_preparing``): that part runs mostly without
the GIL, so it overlaps the MCP SDK's imports instead of following the handshake.
The measurements behind the default are in docs/mcp.md.
"""

from __future__ import annotations

import logging
import threading
import time
from enum import StrEnum
from typing import TYPE_CHECKING

from memory_pipeline.errors import MemoryPipelineError

if TYPE_CHECKING:  # importing the system loads the native libraries; see serving.__main__
    from memory_pipeline.system import MemorySystem

log = logging.getLogger(__name__)

LOAD_ENV_VAR = "HYBRID_RAG_MODEL_LOAD"


class LoadPolicy(StrEnum):
    LAZY = "lazy"
    EAGER = "eager"
    BACKGROUND = "background"


DEFAULT_POLICY = LoadPolicy.BACKGROUND


def warm_up(system: MemorySystem) -> float:
    """Load the models and the published index by running one search; returns seconds.

    A failure is logged, not raised: the first real call reports it as a tool error.
    """
    started = time.perf_counter()
    try:
        system.query("warm-up", system.settings.search_request(top_k=1, record_access=False))
    except MemoryPipelineError as exc:
        log.warning("warm-up search failed (the first call will report it): %s", exc)
    seconds = time.perf_counter() - started
    log.info("models and index loaded in %.2fs", seconds)
    return seconds


def start_background(system: MemorySystem) -> threading.Thread:
    """Warm up on a daemon thread, returned started; the server answers meanwhile."""
    thread = threading.Thread(target=warm_up, args=(system,), name="warm-up", daemon=True)
    thread.start()
    return thread


def start_preparing(system: MemorySystem) -> threading.Thread:
    """Create what loads without holding the GIL (the ONNX session) on a daemon thread,
    returned started, so that it overlaps the imports of the server; see
    ``OnnxEmbedder.prepare``. The thread does nothing for other embedders."""
    from memory_pipeline.embedding.onnx import OnnxEmbedder

    embedder = system.embedder
    work = embedder.prepare if isinstance(embedder, OnnxEmbedder) else (lambda: None)
    thread = threading.Thread(target=work, name="prepare", daemon=True)
    thread.start()
    return thread
