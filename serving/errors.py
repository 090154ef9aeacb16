"""Library errors become tool errors the model can act on; writes take turns.

The SDK forwards only a ``ToolError``'s text to the client; any other exception
reaches it as a bare "Error executing tool X", which tells the model nothing.
Every library error already says what was wrong and what to do, so its message
is passed through unchanged; an exception nobody anticipated (a bug) is named
with its type and message, and its traceback goes to the server's log.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from memory_pipeline.errors import MemoryPipelineError
from memory_pipeline.store.failures import file_error
from serving.hints import to_mcp

# Starts the text of an error nobody anticipated (see tool_errors); tests look for it.
UNEXPECTED = "unexpected error"

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger(__name__)

_UNCHANGED = {
    True: "This tool only reads: the memory is unchanged.",
    False: "The store rolls back a write that fails, so the memory should be unchanged; "
    "index_health shows anything left half-done.",
}


def tool_errors(fn: Callable[P, R], *, read_only: bool = False) -> Callable[P, R]:
    """Run a tool, turning every exception into a ``ToolError`` that says what happened.

    Library and storage errors keep their message. Anything else is a bug: the
    client is told its type and message, that the memory is unchanged and what
    to try; the traceback is logged (to stderr) for whoever runs the server.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except MemoryPipelineError as exc:
            raise ToolError(to_mcp(str(exc))) from exc
        except OSError as exc:  # a file the library did not name: say what it can
            unchanged = _UNCHANGED[read_only].rstrip(".")
            error = file_error(exc, unchanged[0].lower() + unchanged[1:])
            text = str(error) if error else f"storage error: {exc}; check the store and index paths"
            raise ToolError(text) from exc
        except Exception as exc:
            log.error("tool %s failed unexpectedly", fn.__name__, exc_info=exc)
            raise ToolError(
                f"{UNEXPECTED} in the server: {type(exc).__name__}: {exc}. "
                f"{_UNCHANGED[read_only]} Retry once; if it fails the same way, report this "
                "message to whoever runs the server (its log has the details)"
            ) from exc

    return wrapper


class WriteLock:
    """One write at a time inside this server.

    The library checks "is this content already stored?" before its insert
    transaction, so two concurrent ingests of one file would both try to insert
    it; taking turns here makes the second see the first and report "unchanged".
    Searches never wait on it.
    """

    def __init__(self, timeout_s: float = 300.0) -> None:
        self._lock = threading.Lock()
        self.timeout_s = timeout_s

    @contextmanager
    def held(self) -> Iterator[None]:
        if not self._lock.acquire(timeout=self.timeout_s):
            raise ToolError(
                f"another write has held the memory for {self.timeout_s:.0f}s "
                "(a large ingest or forgetting run?); try again when it has finished"
            )
        try:
            yield
        finally:
            self._lock.release()
