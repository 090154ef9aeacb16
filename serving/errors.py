"""Library errors become tool errors the model can act on; writes take turns.

The SDK forwards only a ``ToolError``'s text to the client; any other exception
reaches it as a bare "Error executing tool X". Every library error already says
what was wrong and what to do, so its message is passed through unchanged.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from memory_pipeline.errors import MemoryError_

P = ParamSpec("P")
R = TypeVar("R")


def tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a tool, turning library and storage errors into ``ToolError`` with their message."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except MemoryError_ as exc:
            raise ToolError(str(exc)) from exc
        except OSError as exc:  # disk full, permissions on the store or index folder
            raise ToolError(f"storage error: {exc}; check the store and index paths") from exc

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
